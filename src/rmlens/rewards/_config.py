"""The configs of both training modes and what they share: ``ObjectiveConfig`` (the loss,
which both extend), ``HeadConfig`` (frozen features; its trainer in
``rmlens.rewards.frozen``), ``TrainConfig`` (fine-tuning; its trainers in
``rmlens.rewards.finetune``), the model help, devices, and the scoring and export configs.

Both configs are re-exported by their trainers' modules. This module imports nothing heavy
(no numpy, scipy, torch or pandas), so the command line builds its options from it quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import (
    Config,
    ParamError,
    non_negative,
    non_negative_int,
    positive,
    positive_int,
    unit_interval,
)
from rmlens.backbones import FORMAT_CONSTRAINT, PRECISION_CONSTRAINT, format_field, precision_field
from rmlens.rewards.objectives import OBJECTIVES, names_where, objective_help, objective_of

SCORE_FORMAT_HELP = (
    "How the RM tokenizes a prompt and response: auto keeps its own (an rmlens RM: the "
    "format it was trained with; a Hugging Face classifier: its config's rmlens_format, else "
    "chat when its tokenizer has a template, else raw for causal LMs and pair for encoders); "
    "chat (the chat template), raw (prompt + response + EOS, as TRL's text path) or pair "
    "score in that format instead. The resolved one is recorded with the output."
)

MODEL_HELP = "Backbone: preset (minilm, smollm2-135m), local path (a .gguf file too) or hub id."

OBJECTIVE_NAMES = OBJECTIVES  # the names; each objective's class: rmlens.rewards.objectives
INFLUENCE_METHODS = ("gauss-newton", "last-layer")  # a fine-tuned run's paired counterfactuals
DRO_STEP = {"steps": 0.01, "convex": 0.5}  # group_dro's default step: per batch, per solve
L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
# HeadConfig fields of heads trained by gradient steps: refused with head='logistic'
STEP_FIELDS = ("hidden_dim", "dropout", "lr", "epochs", "batch_size", "weight_decay",
               "patience", "center_coef")  # fmt: skip


@dataclass
class ObjectiveConfig(Config):
    """The loss a reward model is trained with, in both training modes.

    :class:`HeadConfig` (heads on frozen features) and :class:`TrainConfig` (fine-tuning)
    extend it, so the loss's fields are declared, documented and checked here once, and every
    loss is built from one (:meth:`rmlens.rewards.Objective.from_config`). The fields stay
    flat on both: ``HeadConfig(objective="poe", gamma=2.0)``, the ``--objective`` flag, and
    the settings as they are recorded.
    """

    use_margin: bool = field(
        default=False,
        metadata={"help": "Bradley-Terry with margin: -log sigmoid(r+ - r- - m).",
                  "alias": "--no-margin"},
    )  # fmt: skip
    center_coef: float = field(
        default=0.0, metadata={"help": "Reward centering: coef * mean((r+ + r-)^2)."}
    )
    objective: str = field(
        default="bt",
        metadata={
            "help": objective_help()
        },
    )
    smoothing: float = field(
        default=0.1, metadata={"help": "label_smoothing: eps, the assumed label-flip rate."}
    )
    bias_features: tuple[str, ...] = field(
        default=("len_words", "compliance", "model", "refusal"),
        metadata={
            "help": "poe and reweight: shortcut features of the bias-only model, phi(chosen) - "
            "phi(rejected): registered response features (rmlens attribute --list-features) "
            "or 'model' (model identity, from chosen_model and rejected_model)."
        },
    )
    gamma: float = field(
        default=1.0,
        metadata={"help": "reweight: exponent of (1 - sigmoid(d_bias)); complementary: "
                          "exponent of (1 - TG)."},
    )  # fmt: skip
    dro_groups: str | None = field(
        default=None,
        metadata={"help": "group_dro: column of the groups; complementary and curate: the "
                          "groups of their nested audit.",
                  "unset": "user_id, else the prompt"},
    )  # fmt: skip
    dro_step: float | None = field(
        default=None,
        metadata={"help": "group_dro: step size of the group weights (exponentiated "
                          "gradient): per batch for gradient-step heads, per solve for the "
                          "logistic head.",
                  "unset": "0.01 per batch, 0.5 per solve"},
    )  # fmt: skip
    guide_folds: int = field(
        default=4,
        metadata={"help": "complementary and curate: folds of the nested paired audit over "
                          "the run's own training groups."},
    )  # fmt: skip
    curate_weight: float = field(
        default=0.0,
        metadata={"help": "curate: loss weight of the pairs not learned even when trained on "
                          "(0 drops them)."},
    )  # fmt: skip

    _constraints = {
        "use_margin": (True, False),
        "center_coef": (non_negative, "a float >= 0"),
        "objective": OBJECTIVE_NAMES,
        "smoothing": (lambda x: non_negative(x) and x < 0.5, "a float in [0, 0.5)"),
        "bias_features": (
            lambda g: isinstance(g, tuple) and len(g) > 0
            and all(isinstance(x, str) and x.strip() for x in g),
            "a non-empty tuple of feature names",
        ),
        "gamma": (non_negative, "a float >= 0"),
        "dro_groups": (lambda x: x is None or (isinstance(x, str) and x != ""),
                       "None or a column"),
        "dro_step": (lambda x: x is None or positive(x), "None or a float > 0"),
        "guide_folds": (lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 2,
                        "an int >= 2"),
        "curate_weight": (lambda x: non_negative(x) and x <= 1, "a float in [0, 1]"),
    }  # fmt: skip

    def dro_step_for(self, convex: bool) -> float:
        """group_dro's step size: this config's ``dro_step``, else the default of the kind of
        head.

        Parameters
        ----------
        convex : bool
            Whether the head is solved to its optimum (the logistic head: one step per
            solve), else trained by gradient steps (one step per batch).

        Returns
        -------
        float
            The step size of the group weights' exponentiated gradient.
        """
        if self.dro_step is not None:
            return float(self.dro_step)
        return DRO_STEP["convex" if convex else "steps"]


DEVICES = (
    lambda x: isinstance(x, str) and x.split(":")[0] in ("auto", "cpu", "cuda", "mps"),
    "auto, cpu, cuda, cuda:N or mps",
)


@dataclass
class HeadConfig(ObjectiveConfig):
    """How a reward head is built and trained on cached features.

    ``linear`` and ``mlp`` heads: AdamW with weight decay, at most ``epochs`` passes; with
    validation pairs (an audit carves them from each run's own training groups) training
    stops after ``patience`` epochs without a lower validation loss and the best epoch's
    weights are kept, so heads stop where held-out pairs say rather than interpolate their
    training pairs. Without validation pairs every epoch is trained.

    ``logistic`` (the audit's default head): the linear Bradley-Terry head with an L2 penalty,
    solved to its optimum by Newton's method (``rmlens.influence``), so a run's head
    depends on its training pairs alone (no seed, no stopping epoch), and the head with one
    group removed or added is one Newton step away: the paired estimator's counterfactual.
    lambda is chosen per run from ``l2_grid`` by the validation loss.
    """

    head: str = field(
        default="linear",
        metadata={
            "help": "Reward head: logistic (linear Bradley-Terry with an L2 penalty, solved to "
            "its optimum: no learning rate, epochs or seed; lambda chosen from --l2-grid on "
            "validation pairs; an audit's default), linear or mlp (AdamW with early stopping)."
        },
    )
    hidden_dim: int = field(default=256, metadata={"help": "Hidden units of the MLP head."})
    dropout: float = field(default=0.0, metadata={"help": "Dropout on the head's input."})
    lr: float = field(default=1e-3, metadata={"help": "AdamW learning rate."})
    epochs: int = field(
        default=200,
        metadata={"help": "Most passes over the training pairs (early stopping ends sooner)."},
    )
    batch_size: int = field(default=128, metadata={"help": "Pairs per optimizer step."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    patience: int = field(
        default=5,
        metadata={
            "help": "Early stopping: epochs without a lower validation loss before training "
            "stops; the best epoch's weights are kept (0: train every epoch)."
        },
    )
    l2_grid: tuple[float, ...] = field(
        default=L2_GRID,
        metadata={
            "help": "Logistic head: penalties lambda tried per run (objective: sum of the "
            "pair losses + lambda/2 |w|^2 on standardized features), the one with the lowest "
            "validation loss kept; one value: no choice, no validation pairs needed."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of initialisation and shuffling."})

    _constraints = {
        "head": ("logistic", "linear", "mlp"),
        "l2_grid": (
            lambda g: isinstance(g, tuple) and len(g) > 0 and all(positive(x) for x in g),
            "a non-empty tuple of floats > 0",
        ),
        "hidden_dim": (positive_int, "an int > 0"),
        "dropout": (unit_interval, "a float in [0, 1)"),
        "lr": (positive, "a float > 0"),
        "epochs": (positive_int, "an int > 0"),
        "batch_size": (positive_int, "an int > 0"),
        "weight_decay": (non_negative, "a float >= 0"),
        "patience": (non_negative_int, "an int >= 0"),
        "seed": (non_negative_int, "an int >= 0"),
        **ObjectiveConfig._constraints,
    }

    @property
    def convex(self) -> bool:
        """Whether the head is solved to an optimum (``logistic``), not trained by steps."""
        return self.head == "logistic"

    @property
    def validates(self) -> bool:
        """Whether training reads validation pairs: early stopping, or the choice of lambda."""
        return len(self.l2_grid) > 1 if self.convex else self.patience > 0

    def _check_more(self) -> None:
        if not self.convex:
            return
        for name in STEP_FIELDS:
            value, default = getattr(self, name), HeadConfig.__dataclass_fields__[name].default
            if value != default:
                raise ParamError(
                    name, "HeadConfig",
                    f"left at {default!r} with the logistic head (`head` 'logistic' is solved "
                    "to its optimum by Newton's method: no steps, epochs or dropout, and lambda "
                    "from `l2_grid`; `head` 'linear' or 'mlp' train by AdamW)",
                    value,
                )  # fmt: skip


@dataclass
class TrainConfig(ObjectiveConfig):
    """How a reward model is fine-tuned (DESIGN.md section 2).

    Model: ``model``, ``rm`` (explicit head or implicit DPO reward), ``finetune`` (LoRA or
    full), the LoRA shape, ``beta``, ``max_length`` and ``format``. Loss: ``loss``, ``use_margin``,
    ``center_coef``. Training: epochs, batch size, accumulation, learning rates and schedule,
    evaluation split, early stopping, checkpoints, device and precision, seed.
    """

    model: str = field(
        default="minilm",
        metadata={"help": MODEL_HELP},
    )
    rm_kind: str = field(
        default="explicit",
        metadata={
            "help": "explicit: linear head on the pooled hidden state; implicit: "
            "beta * (log pi(y|x) - log pi_ref(y|x)) of a causal LM (DPO)."
        },
    )
    finetune: str = field(
        default="lora", metadata={"help": "lora: adapters (and the head) through peft; full."}
    )
    influence: str = field(
        default="gauss-newton",
        metadata={
            "help": "How a paired audit's run gives each pair its group's removal or addition: "
            "gauss-newton (through the LoRA adapters and the head, per-pair gradients) or "
            "last-layer (the head alone: cheapest, leaves the backbone's change out)."
        },
    )
    influence_blocks: int = field(
        default=0,
        metadata={
            "help": "gauss-newton through the adapters of the last K transformer blocks and "
            "the head only (0: every block): its backward pass stops at block L - K, a "
            "cheaper and different estimator (docs/benchmarks.rst measures its agreement)."
        },
    )
    lora_r: int = field(default=8, metadata={"help": "LoRA rank."})
    lora_alpha: float = field(default=16.0, metadata={"help": "LoRA scaling alpha."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout inside LoRA layers."})
    lora_targets: str = field(
        default="all-linear",
        metadata={"help": "Modules that get adapters: all-linear or comma-separated names."},
    )
    beta: float = field(
        default=0.1, metadata={"help": "Implicit RM: reward = beta * log-ratio to the reference."}
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Tokens per prompt+response.", "unset": "the model's limit"}
    )
    format: str = format_field()
    loss: str = field(
        default="bradley-terry",
        metadata={"help": "bradley-terry (pairs) or plackett-luce (rankings)."},
    )
    # One regime for `rmlens train` and an audit's runs (memorization._regime), so its RM is
    # audited alone in the runs' regime, calibrated on its evaluation split; an audit's runs
    # also choose the rate from lr_grid (benchmarks/finetune_defaults.py: MiniLM learns)
    epochs: int = field(default=4, metadata={"help": "Passes over the training pairs (at most)."})
    batch_size: int = field(default=8, metadata={"help": "Pairs per forward pass."})
    grad_accum: int = field(default=1, metadata={"help": "Forward passes per optimizer step."})
    lr: float = field(default=3e-4, metadata={"help": "AdamW learning rate of the backbone."})
    head_lr: float = field(default=2e-3, metadata={"help": "Learning rate of the reward head."})
    lr_grid: tuple[float, ...] = field(
        default=(),
        metadata={
            "help": "Learning rates tried (each from the base weights), the one with the "
            "lowest evaluation loss kept (an audit's runs: on their validation groups); "
            "empty: --lr alone. Needs evaluation pairs."
        },
    )
    schedule: str = field(
        default="linear", metadata={"help": "Decay after warmup: constant, linear or cosine."}
    )
    warmup_ratio: float = field(
        default=0.1, metadata={"help": "Share of optimizer steps with a linear warmup."}
    )
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(
        default=1.0, metadata={"help": "Gradient clipping norm (0: no clipping)."}
    )
    eval_fraction: float = field(default=0.2, metadata={"help": (
        "Share of pairs held out, never trained on: early stopping, lr_grid's choice, the "
        "one-checkpoint audit's calibration (0: train on every pair).")})  # fmt: skip
    patience: int = field(default=1, metadata={
        "help": "Early stopping: epochs without a lower eval loss (0: off)."})  # fmt: skip
    save_steps: int = field(
        default=0, metadata={"help": "Checkpoint every N optimizer steps (0: each epoch)."}
    )
    packing: bool = field(
        default=True,
        metadata={"help": "Causal LMs: encode the shared prompt once per pair (block mask)."},
    )
    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:1, mps."})
    precision: str = precision_field()
    ensemble: int = field(default=1, metadata={"help": "rmlens train: members of a seed ensemble."})
    seed: int = field(default=0, metadata={"help": "Seed of initialisation and batch order."})

    _renamed = {"rm": "rm_kind"}  # ``rm`` now names an RM folder on every command

    @classmethod
    def upgrade(cls, data):
        """A saved config's fields as this version reads them.

        Parameters
        ----------
        data : dict
            A saved config; its ``bf16 = true/false``, saved before ``precision``, reads as
            ``precision`` bf16 or fp32.

        Returns
        -------
        dict
        """
        if isinstance(data, dict) and "bf16" in data:  # a precision saved with it wins
            data = {"precision": "bf16" if data["bf16"] else "fp32", **data}
            del data["bf16"]
        return super().upgrade(data)

    _constraints = {
        "rm_kind": ("explicit", "implicit"),
        "finetune": ("lora", "full"),
        "influence": INFLUENCE_METHODS,
        "influence_blocks": (non_negative_int, "an int >= 0"),
        "lora_r": (positive_int, "an int > 0"),
        "lora_alpha": (positive, "a float > 0"),
        "lora_dropout": (unit_interval, "a float in [0, 1)"),
        "lora_targets": (lambda x: isinstance(x, str) and x.strip() != "", "a non-empty string"),
        "beta": (positive, "a float > 0"),
        "max_length": (lambda x: x is None or (positive_int(x) and x >= 2), "None or an int >= 2"),
        "format": FORMAT_CONSTRAINT,
        "loss": ("bradley-terry", "plackett-luce"),
        "epochs": (positive_int, "an int > 0"),
        "batch_size": (positive_int, "an int > 0"),
        "grad_accum": (positive_int, "an int > 0"),
        "lr": (positive, "a float > 0"),
        "head_lr": (positive, "a float > 0"),
        "lr_grid": (
            lambda g: isinstance(g, tuple) and all(positive(x) for x in g),
            "a tuple of floats > 0",
        ),
        "schedule": ("constant", "linear", "cosine"),
        "warmup_ratio": (unit_interval, "a float in [0, 1)"),
        "weight_decay": (non_negative, "a float >= 0"),
        "max_grad_norm": (non_negative, "a float >= 0"),
        "eval_fraction": (unit_interval, "a float in [0, 1)"),
        "patience": (non_negative_int, "an int >= 0"),
        "save_steps": (non_negative_int, "an int >= 0"),
        "packing": (True, False),
        "device": (
            lambda x: isinstance(x, str) and x.split(":")[0] in ("auto", "cpu", "cuda", "mps"),
            "auto, cpu, cuda, cuda:N or mps",
        ),
        "precision": PRECISION_CONSTRAINT,
        "ensemble": (positive_int, "an int > 0"),
        "seed": (non_negative_int, "an int >= 0"),
        **ObjectiveConfig._constraints,
    }

    def _check_more(self) -> None:
        objective = objective_of(self)
        if objective.frozen_weights and self.rm_kind != "explicit":
            raise ParamError(
                "objective", type(self).__name__,
                f"{_either(names_where('frozen_weights', False))} for an implicit RM (the loss "
                f"weights of {self.objective} come from an explicit head on the backbone's "
                "frozen features)", self.objective,
            )  # fmt: skip
        if self.loss == "plackett-luce" and not objective.rankings:
            raise ParamError(
                "objective", type(self).__name__,
                f"{_either(names_where('rankings'))} with loss='plackett-luce'", self.objective,
            )
        if len(self.lr_grid) > 1 and not (self.patience or self.eval_fraction):
            raise ParamError(
                "lr_grid", type(self).__name__,
                "a single rate unless there are validation pairs (patience > 0 in an audit, "
                "or eval_fraction > 0)", self.lr_grid,
            )  # fmt: skip


def _either(names: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


@dataclass
class ScoreConfig(Config):
    """How a saved reward model is loaded to score (``score``, ``evaluate``, ``sweep``)."""

    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:1, mps."})
    precision: str = precision_field()
    score_index: int = field(
        default=0,
        metadata={"help": "Logit read as the reward of a sequence classifier: logits[:, INDEX]."},
    )
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Run a hub classifier's own code (only models you trust)."}
    )
    format: str = format_field(SCORE_FORMAT_HELP)
    max_length: int | None = field(
        default=None,
        metadata={"help": "Tokens kept of each prompt + response (the prompt cut from the "
                          "left): default the RM's own (what it was trained or exported with, "
                          "else the model's limit). The resolved one is recorded with the "
                          "output, beside the format."},
    )  # fmt: skip

    _constraints = {
        "device": DEVICES,
        "precision": PRECISION_CONSTRAINT,
        "score_index": (non_negative_int, "an int >= 0"),
        "trust_remote_code": (True, False),
        "format": FORMAT_CONSTRAINT,
        "max_length": (lambda x: x is None or (positive_int(x) and x >= 2), "None or an int >= 2"),
    }


def resolve_device(name: str) -> str:
    """The device a run uses: ``auto`` is cuda if available, else mps, else cpu.

    Parameters
    ----------
    name : str
        ``auto`` or a torch device name (returned as given).

    Returns
    -------
    str
    """
    import torch

    if name != "auto":
        return name
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


@dataclass
class ExportConfig(Config):
    """What ``export`` writes out of an RM folder or an audit (``rmlens export``)."""

    run: str | None = field(
        default=None,
        metadata={"help": "For an audit or an ensemble: the run (member) to export, e.g. 000."},
    )
