"""The fine-tuned trainers' pieces that need torch: networks, examples, reset, influence.

``rmlens.rewards.finetune`` holds the trainers and imports this module when they run (the
command line reads ``TrainConfig`` without torch).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from scipy.special import expit

from rmlens._errors import InputError
from rmlens._io import json_sha1
from rmlens.backbones import Backbone, featurize, truncation_of
from rmlens.data import data_sha1
from rmlens.rewards._activity import describe_objective, objective_activity
from rmlens.rewards._finetune_loop import length_batches, score_examples
from rmlens.rewards._head_fit import loss_weights
from rmlens.rewards._implicit import ImplicitNet
from rmlens.rewards._influence import (
    DAMPING,
    bt_terms,
    gauss_newton_counterfactuals,
    last_layer_counterfactuals,
)
from rmlens.rewards._nets import ExplicitNet, reset_lora, wrap_lora
from rmlens.rewards._packing import Example, make_example
from rmlens.rewards._pair_gradients import pair_gradients
from rmlens.rewards._trainer_base import inside_outside, warn_inactive
from rmlens.rewards.losses import ObjectiveModule, PairExtras
from rmlens.rewards.objectives import objective_of


def body_model(bb: Backbone, cfg):
    """The backbone's model, wrapped in LoRA adapters or trained fully."""
    if cfg.finetune == "lora":
        return wrap_lora(bb.model, cfg)
    return bb.model.requires_grad_(True)


def base_state(bb: Backbone, cfg) -> dict | None:
    """Full fine-tuning: a CPU copy of the base weights, to go back to before each run."""
    if cfg.finetune != "full":
        return None
    return {k: v.detach().to("cpu", copy=True) for k, v in bb.model.state_dict().items()}


def explicit_net(bb: Backbone, cfg) -> ExplicitNet:
    net = ExplicitNet(body_model(bb, cfg), bb.hidden_size, bb.pooling, bb.kind == "causal")
    net.reset_head()
    return net


def implicit_net(bb: Backbone, cfg) -> ImplicitNet:
    if bb.kind != "causal" or bb.model.get_output_embeddings() is None:
        raise InputError(
            f"model '{bb.name}': an implicit RM needs a causal language model with an LM "
            "head (e.g. smollm2-135m), not an encoder"
        )
    reference = None
    if cfg.finetune == "full":
        reference = copy.deepcopy(bb.model).eval().requires_grad_(False)
    return ImplicitNet(body_model(bb, cfg), cfg.beta, reference)


def reset(net, state: dict | None, seed: int) -> None:
    """Back to the base weights, with fresh adapters and head drawn from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if state is None:
            reset_lora(net)
        else:
            body = net.lm if isinstance(net, ImplicitNet) else net.body
            body.load_state_dict(state, strict=False)
        if isinstance(net, ExplicitNet):
            net.reset_head()
    net._owner = None


@torch.inference_mode()
def reference_logps(net: ImplicitNet, examples: list[Example], rt, batch_size: int) -> None:
    """Implicit RMs: the reference log-probs of every example still without them."""
    todo = [ex for ex in examples if ex.ref is None]
    for index in length_batches([ex.packed_length for ex in todo], batch_size):
        batch = rt.batch(todo, index)
        with rt.autocast():
            ref = net.reference_logps(batch).float().cpu()
        for b, i in enumerate(index):
            todo[i].ref = ref[b, : len(todo[i].seqs)].tolist()


def examples_of(
    data: pd.DataFrame, bb: Backbone, cfg, implicit: bool
) -> tuple[list[Example], np.ndarray]:
    """One tokenized example per pair (or ranking) of ``data``, in the backbone's format,
    and the usable-pair mask."""
    tok, limit, fmt = bb.tokenizer, bb.max_length, bb.format
    if "responses" in data:
        if cfg.loss != "plackett-luce":
            raise InputError(
                "rankings (a 'responses' column) need `loss` 'plackett-luce'; "
                "load_pairs expands them into pairs instead"
            )
        examples = []
        for prompt, responses, scores in zip(data.prompt, data.responses, data.scores):
            order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
            ranked = [responses[i] for i in order]
            examples.append(make_example(tok, prompt, ranked, limit, with_response=implicit,
                                         format=fmt))  # fmt: skip
    else:
        margins = (
            data["margin"].fillna(0.0).to_numpy(float)
            if "margin" in data
            else np.zeros(len(data))
        )
        examples = [
            make_example(tok, p, [c, r], limit, m, with_response=implicit, format=fmt)
            for p, c, r, m in zip(data.prompt, data.chosen, data.rejected, margins)
        ]
    kept = np.array([len(ex.seqs) >= 2 and ex.distinct for ex in examples], dtype=bool)
    return examples, kept


def examples_truncation(examples: list[Example], max_length: int) -> dict:
    """What truncation cut from tokenized examples (``truncation_summary``; a ranking
    counts as cut when any of its responses was)."""
    return truncation_of(max_length, [ex.lengths or [len(s) for s in ex.seqs] for ex in examples])


def extras_at(objective: str, dphi, groups, index: np.ndarray) -> PairExtras | None:
    """Bias features and groups of the pairs at ``index`` (None for plain Bradley-Terry)."""
    if objective_of(objective).plain:
        return None
    return PairExtras(
        dphi=None if dphi is None else torch.as_tensor(dphi[index], dtype=torch.float32),
        group=None if groups is None else torch.as_tensor(
            np.unique(groups[index], return_inverse=True)[1].ravel()
        ),
    )  # fmt: skip


def guide_features(trainer, pairs: pd.DataFrame):
    """Frozen features of the base model for the audit-guided loss weights, or None when
    the objective has none. Call at the base weights (before training, or after
    ``_reset``); no embedding cache, so adapted weights can never be cached as the base's."""
    cfg = trainer.config_
    if not objective_of(cfg).frozen_weights:
        return None
    return featurize(trainer.base_, pairs, cache_dir=False, batch_size=cfg.batch_size,
                     quiet=True)  # fmt: skip


def guided_weights(cfg, features, margin, groups, train_index, eval_index) -> tuple:
    """``rmlens.rewards._head_fit.loss_weights`` of the pairs at ``train_index``, the pairs
    at ``eval_index`` choosing the nested audit's lambda: (weights, guide, per_pair)."""
    f, train, val = features, np.asarray(train_index, int), np.asarray(eval_index, int)
    pick = lambda a, i: None if a is None else a[i]  # noqa: E731
    validation = (f.chosen[val], f.rejected[val], pick(margin, val)) if len(val) else None
    return loss_weights(cfg, f.chosen[train], f.rejected[train], pick(margin, train),
                        pick(groups, train), validation=validation)  # fmt: skip


def guide_record(cfg, weights, guide) -> dict:
    """A run's record of its loss weights: their summary, how they were made, and whether
    the mechanism acted (``objective_active``)."""
    objective = ObjectiveModule(cfg.objective, weights=weights, guide=guide)
    return describe_objective(objective, None, objective_activity(objective, cfg, None))


def loss_weights_table(trainer, data: pd.DataFrame, train_index, eval_index):
    """The audit-guided objectives' loss weights of the training pairs, from a frozen paired
    audit of them on the base model's features (``eval_index`` chooses its lambda): a table
    ``id, weight, tm, tg, q`` whose ``attrs`` say how they were made (with
    ``objective_active``, and ``objective_inactive_why`` when they did nothing); None for
    the other objectives. Warns when the weights did nothing."""
    features = guide_features(trainer, data)
    if features is None:
        return None
    cfg = trainer.config_
    margin = data["margin"].to_numpy(float) if "margin" in data else None
    weights, guide, per_pair = guided_weights(cfg, features, margin, trainer.groups_,
                                              train_index, eval_index)  # fmt: skip
    table = pd.DataFrame({"id": data.id.to_numpy()[train_index], "weight": weights, **per_pair})
    table.attrs.update(guide_record(cfg, weights, guide))
    warn_inactive(cfg.objective, [{"active": table.attrs["objective_active"],
                                   "why": table.attrs.get("objective_inactive_why")}])
    return table


def checkpoint_key(cfg, identity, data: pd.DataFrame, eval_data: pd.DataFrame | None) -> str:
    """Checkpoints' key: the settings, the base model and the data (``data_sha1``).

    The examples follow from these (tokenizer of the base, ``max_length``; the eval split
    from ``eval_fraction`` and ``seed``), so a checkpoint is resumed only for the same.
    """
    skip = {"device", "ensemble", "save_steps", "influence"}
    settings = {k: v for k, v in cfg.to_dict().items() if k not in skip}
    parts = [settings, identity, data_sha1(data)]
    parts.append(None if eval_data is None else data_sha1(eval_data))
    return json_sha1(parts, 16)


def influence_scores(trainer, fit_index, eval_index, damping: tuple[float, ...] = DAMPING):
    """Rewards (n, 2) of every pair, and p, p_cf over the damping grid: Gauss-Newton
    influence through the trained parameters (``influence`` gauss-newton), or the score
    head's alone from the pooled hidden states (``rmlens.rewards._influence``)."""
    cfg, net = trainer.config_, trainer.net_
    kept = np.asarray(trainer.kept_, dtype=bool)
    offset, target = bt_terms(cfg, trainer.margin_)
    if cfg.influence == "gauss-newton":
        inside, outside = inside_outside(len(kept), kept, fit_index, eval_index)
        rows = np.flatnonzero(inside | outside)  # the pairs a group's step moves
        r = np.full((len(kept), 2), np.nan)
        others = np.flatnonzero(kept & ~(inside | outside))  # validation: scored only
        if len(others):
            r[others] = score_examples(net, [trainer.examples_[i] for i in others],
                                       trainer.runtime_, batch_size=cfg.batch_size)[:, :2]
        r[rows], jac = pair_gradients(net, [trainer.examples_[i] for i in rows],
                                      trainer.runtime_, batch_size=cfg.batch_size,
                                      seed=cfg.seed)  # fmt: skip
        d = np.nan_to_num(r[:, 0] - r[:, 1])
        p, p_cf = expit(d), np.full((len(d), len(damping)), np.nan)
        _, p_cf[rows], lambdas = gauss_newton_counterfactuals(
            jac, d[rows], trainer.groups_codes_[rows], inside[rows], outside[rows],
            offset=None if offset is None else offset[rows], target=target, damping=damping,
        )  # fmt: skip
    else:
        h = score_examples(
            net, trainer.examples_, trainer.runtime_, batch_size=cfg.batch_size, method="pooled"
        ).astype(np.float64)  # (n, 2, d); NaN for the unusable pairs
        h = np.nan_to_num(h)
        u = net.head.weight.detach().double().cpu().numpy()[0]
        r = h @ u + float(net.head.bias.detach())
        inside, outside = inside_outside(len(h), kept, fit_index, eval_index)
        p, p_cf, lambdas = last_layer_counterfactuals(
            h[:, 0] - h[:, 1], u, trainer.groups_codes_, inside, outside, offset=offset,
            target=target, damping=damping,
        )  # fmt: skip
    r[~kept] = np.nan
    p[~kept] = np.nan
    return r, (p, p_cf, lambdas)
