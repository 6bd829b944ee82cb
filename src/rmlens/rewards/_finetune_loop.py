"""The fine-tuning loop of ``rmlens.rewards.finetune``'s trainers: length-grouped batches,
gradient accumulation, warmup then decay, evaluation each epoch, early stopping, and
checkpoints that resume exactly (``_checkpoint``); the loss is ``losses.ranking_loss``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rmlens.progress import progress_bar
from rmlens.rewards._checkpoint import restore, save
from rmlens.rewards._config import TrainConfig
from rmlens.rewards._nets import load_trainable, trainable_state
from rmlens.rewards._packing import Example, collate, length_batches
from rmlens.rewards.losses import ObjectiveModule, PairExtras, ranking_loss
from rmlens.rewards.objectives import objective_of
from rmlens.stats import pairwise_correct


@dataclass
class Runtime:
    """How batches are laid out and where they run."""

    mode: str  # "packed" | "causal" | "encoder"
    pad_id: int
    device: str = "cpu"
    bf16: bool = False
    side: str = "right"

    def batch(self, examples: list[Example], index):
        dtype = torch.bfloat16 if self.bf16 else torch.float32
        return collate(
            [examples[i] for i in index],
            index,
            pad_id=self.pad_id,
            mode=self.mode,
            side=self.side,
            dtype=dtype,
        ).to(self.device)

    def autocast(self):
        return torch.autocast(self.device.split(":")[0], torch.bfloat16, enabled=self.bf16)


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based)."""
    if step < warmup:
        return (step + 1) / (warmup + 1)  # linear warmup
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return 1.0


class _Stats:
    """Running pairwise statistics (every ordered pair i < j of a ranking), as reward_stats."""

    def __init__(self, saved: dict | None = None):
        self.s = saved or {
            "loss": 0.0,
            "n": 0,
            "pairs": 0,
            "correct": 0.0,
            "margin": 0.0,
            "rsum": 0.0,
            "rn": 0,
            "rmin": math.inf,
            "rmax": -math.inf,
        }

    def add(self, rewards: torch.Tensor, valid: torch.Tensor, loss: float) -> None:
        r, v = rewards.detach().float().cpu(), valid.cpu()
        k = r.shape[1]
        upper = torch.triu(torch.ones(k, k, dtype=torch.bool), 1) & v[:, :, None] & v[:, None]
        diff = (r[:, :, None] - r[:, None, :])[upper]  # better minus worse
        s = self.s
        s["loss"] += loss * len(r)
        s["n"] += len(r)
        s["pairs"] += int(diff.numel())
        s["correct"] += float(pairwise_correct(diff.numpy()).sum())
        s["margin"] += float(diff.sum())
        s["rsum"] += float(r[v].sum())
        s["rn"] += int(v.sum())
        s["rmin"] = min(s["rmin"], float(r[v].min()))
        s["rmax"] = max(s["rmax"], float(r[v].max()))

    def metrics(self) -> dict[str, float]:
        s, nan = self.s, float("nan")
        return {
            "loss": s["loss"] / s["n"] if s["n"] else nan,
            "accuracy": s["correct"] / s["pairs"] if s["pairs"] else nan,
            "margin": s["margin"] / s["pairs"] if s["pairs"] else nan,
            "reward_mean": s["rsum"] / s["rn"] if s["rn"] else nan,
            "reward_min": s["rmin"] if s["rn"] else nan,
            "reward_max": s["rmax"] if s["rn"] else nan,
        }


@torch.inference_mode()
def score_examples(
    net,
    examples: list[Example],
    rt: Runtime,
    *,
    batch_size: int,
    quiet: bool = True,
    label: str = "scoring",
    method: str = "rewards",
) -> np.ndarray:
    """Rewards (n, K) of every example (NaN where a ranking has fewer than K responses).

    Batches run longest first; each example's rewards do not depend on the batch.
    ``method``: the net's method to call per batch, giving (B, K, ...) values
    (``"pooled"``: an explicit RM's pooled hidden states, (n, K, d)).
    """
    training = net.training
    net.eval()
    k_max = max((len(ex.seqs) for ex in examples), default=2)
    out = np.full((len(examples), k_max), np.nan)
    with progress_bar(label, total=len(examples), quiet=quiet) as advance:
        for index in length_batches([ex.packed_length for ex in examples], batch_size):
            batch = rt.batch(examples, index)
            with rt.autocast():
                r = getattr(net, method)(batch).float().cpu().numpy()
            if out.ndim != r.ndim:
                out = np.full((len(examples), k_max, *r.shape[2:]), np.nan)
            for b, i in enumerate(index):
                out[i, : len(examples[i].seqs)] = r[b, : len(examples[i].seqs)]
            advance(len(index))
    net.train(training)
    return out


def evaluate(
    net,
    examples: list[Example],
    rt: Runtime,
    config: TrainConfig,
    objective: ObjectiveModule | None = None,
    extras: PairExtras | None = None,
) -> dict:
    """Loss and pairwise metrics of ``examples`` (names as in ``reward_stats``); with an
    ``objective``, its validation loss (``ObjectiveModule.validation_loss``)."""
    r = score_examples(net, examples, rt, batch_size=config.batch_size)
    valid = torch.as_tensor(~np.isnan(r))
    rewards = torch.as_tensor(np.nan_to_num(r), dtype=torch.float32)
    margin = torch.tensor([ex.margin for ex in examples], dtype=torch.float32)
    if objective is None:
        loss = float(ranking_loss(rewards, valid, margin, config))
    else:
        e = extras or PairExtras()
        m = margin if config.use_margin else None
        d = rewards[:, 0] - rewards[:, 1]
        loss = objective.validation_loss(d, PairExtras(m, e.dphi, e.group))
    stats = _Stats()
    stats.add(rewards, valid, loss)
    return stats.metrics()


def _optimizer(net, config: TrainConfig, objective=None) -> torch.optim.Optimizer:
    head, body = [], []
    for name, p in net.named_parameters():
        if p.requires_grad:
            (head if name.startswith("head.") else body).append(p)
    if objective is not None:
        head += list(objective.parameters())  # poe: the bias expert, at the head's rate
    groups = [
        g
        for g in (
            {"params": body, "lr": config.lr, "base_lr": config.lr},
            {"params": head, "lr": config.head_lr, "base_lr": config.head_lr},
        )
        if g["params"]
    ]
    return torch.optim.AdamW(groups, weight_decay=config.weight_decay)


def train_loop(
    net,
    train: list[Example],
    config: TrainConfig,
    rt: Runtime,
    *,
    eval_examples: list[Example] | None = None,
    extras: PairExtras | None = None,
    eval_extras: PairExtras | None = None,
    checkpoint_dir=None,
    fingerprint: str = "",
    quiet: bool = False,
    weights: np.ndarray | None = None,
    guide: dict | None = None,
) -> list[dict]:
    """Train ``net`` (its ``rewards(batch)`` gives (B, K)) on ``train``; return the history.

    ``extras`` and ``eval_extras``: the bias features and groups of the training and
    evaluation examples, in their order, for objectives other than plain Bradley-Terry;
    ``weights``: the training examples' loss weights of the audit-guided objectives
    (``guide``: how they were made).

    One entry per epoch: ``epoch``, ``step``, ``lr``, ``train_*`` and, with evaluation
    examples, ``eval_*`` metrics (``loss``, ``accuracy``, ``margin``, ``reward_mean/min/max``).
    With ``patience``, training stops after that many epochs without a lower eval loss and
    the best epoch's weights are restored. With ``checkpoint_dir``, a checkpoint is written
    every ``save_steps`` optimizer steps and at each epoch end, and an interrupted run
    resumes from the newest one.
    """
    if config.patience and not eval_examples:
        raise ValueError(
            "The 'patience' parameter of TrainConfig needs evaluation pairs: set "
            f"`eval_fraction` > 0 or pass eval pairs. Got patience={config.patience}."
        )
    devices = [torch.device(rt.device)] if rt.device.startswith("cuda") else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        torch.manual_seed(config.seed)  # dropout; a resumed run restores the saved state
        objective = None
        if not objective_of(config).plain:
            objective = ObjectiveModule.from_config(
                config, train=extras, seed=config.seed, weights=weights, guide=guide
            ).to(rt.device)
        evals = (eval_examples, eval_extras)
        return _train(net, train, config, rt, evals, objective, extras, checkpoint_dir,
                      fingerprint, quiet)  # fmt: skip


def _train(net, train, config, rt, evals, objective, extras, checkpoint_dir, fingerprint, quiet):
    eval_examples, eval_extras = evals
    extras = None if extras is None else extras.to(rt.device)
    eval_extras = None if eval_extras is None else eval_extras.to(rt.device)
    opt = _optimizer(net, config, objective)
    weight = None
    if objective is not None and objective.weights_ is not None:
        weight = torch.as_tensor(objective.weights_, dtype=torch.float32, device=rt.device)
    params = [p for g in opt.param_groups for p in g["params"]]
    lengths = [ex.packed_length for ex in train]
    n_batches = math.ceil(len(train) / config.batch_size)
    per_epoch = math.ceil(n_batches / config.grad_accum)
    total = per_epoch * config.epochs
    warmup = int(round(config.warmup_ratio * total))
    state = {
        "epoch": 0,
        "batch": 0,
        "step": 0,
        "best": None,
        "bad": 0,
        "stopped": False,
        "history": [],
        "stats": None,
    }
    best = None
    ckpt = Path(checkpoint_dir) if checkpoint_dir else None
    if ckpt is not None and (ckpt / "latest.json").exists():
        state, best = restore(ckpt, net, opt, fingerprint, objective)
    net.train()
    if objective is not None:
        objective.train()
    done = state["epoch"] * n_batches + state["batch"]
    with progress_bar("training", total=config.epochs * n_batches, quiet=quiet) as advance:
        advance(done)
        while state["epoch"] < config.epochs and not state["stopped"]:
            epoch = state["epoch"]
            batches = length_batches(
                lengths, config.batch_size, np.random.default_rng([config.seed, epoch])
            )
            stats = _Stats(state["stats"])
            for g in range(0, len(batches), config.grad_accum):
                group = batches[g : g + config.grad_accum]
                if g < state["batch"]:
                    continue
                n_group = sum(len(b) for b in group)
                for index in group:
                    batch = rt.batch(train, index)
                    pick = torch.as_tensor(index, device=rt.device)
                    with rt.autocast():
                        rewards = net.rewards(batch)
                        loss = ranking_loss(
                            rewards, batch.valid, batch.margin, config, objective,
                            None if extras is None else extras.take(pick),
                            None if weight is None else weight[pick],
                        )  # fmt: skip
                    (loss * (len(index) / n_group)).backward()
                    stats.add(rewards, batch.valid, float(loss.detach()))
                factor = lr_factor(state["step"], total, warmup, config.schedule)
                for pg in opt.param_groups:
                    pg["lr"] = pg["base_lr"] * factor
                if config.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                opt.step()
                opt.zero_grad(set_to_none=True)
                state["step"] += 1
                state["batch"] = g + len(group)
                state["stats"] = stats.s
                advance(len(group))
                every = config.save_steps
                if ckpt is not None and every and state["step"] % every == 0:
                    save(ckpt, net, opt, state, fingerprint, best, objective)
            record = {"epoch": epoch + 1, "step": state["step"], "lr": opt.param_groups[0]["lr"]}
            record.update({f"train_{k}": v for k, v in stats.metrics().items()})
            if eval_examples:
                metrics = evaluate(net, eval_examples, rt, config, objective, eval_extras)
                record.update({f"eval_{k}": v for k, v in metrics.items()})
                if config.patience:
                    if state["best"] is None or record["eval_loss"] < state["best"]:
                        state["best"], state["bad"] = record["eval_loss"], 0
                        best = trainable_state(net)
                    else:
                        state["bad"] += 1
                        state["stopped"] = state["bad"] >= config.patience
            state["history"].append(record)
            state.update(epoch=epoch + 1, batch=0, stats=None)
            if ckpt is not None:
                save(ckpt, net, opt, state, fingerprint, best, objective)
    if best is not None:
        load_trainable(net, best)
    net.eval()
    return state["history"]
