"""Configuration of fine-tuned reward models: one source for the Python API and the CLI."""

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

MODEL_HELP = "Backbone: preset (minilm, smollm2-135m), local path (a .gguf file too) or hub id."

OBJECTIVE_NAMES = ("bt", "label_smoothing", "poe", "reweight", "group_dro")
L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
# HeadConfig fields of heads trained by gradient steps: refused with head='logistic'
STEP_FIELDS = ("hidden_dim", "dropout", "lr", "epochs", "batch_size", "weight_decay",
               "patience", "center_coef")  # fmt: skip


# The objective's fields, shared by HeadConfig and TrainConfig: name -> (default, metadata)
_OBJECTIVE_FIELDS = {
    "objective": ("bt", {
        "help": "Training objective: bt (Bradley-Terry); label_smoothing ((1-eps) BT(d) + eps "
        "BT(-d)); poe (product of experts with a bias-only model on --bias-features, only the "
        "main RM kept); reweight (loss weights (1 - sigmoid(d_bias))^gamma from a bias-only "
        "model fitted on the run's training pairs); group_dro (worst-group loss over "
        "--dro-groups)."
    }),
    "smoothing": (0.1, {"help": "label_smoothing: eps, the assumed label-flip rate."}),
    "bias_features": (("len_words", "compliance", "model", "refusal"), {
        "help": "poe and reweight: shortcut features of the bias-only model, phi(chosen) - "
        "phi(rejected): registered response features (rmlens attribute --list-features) or "
        "'model' (model identity, from chosen_model and rejected_model)."
    }),
    "gamma": (1.0, {"help": "reweight: exponent of (1 - sigmoid(d_bias))."}),
    "dro_groups": (None, {"help": "group_dro: column of the groups.", "unset": "user_id"}),
    "dro_step": (0.01, {"help": "group_dro: step size of the group weights."}),
}  # fmt: skip


def objective_field(name: str):
    default, metadata = _OBJECTIVE_FIELDS[name]
    return field(default=default, metadata=metadata)


OBJECTIVE_CONSTRAINTS = {
    "objective": OBJECTIVE_NAMES,
    "smoothing": (lambda x: non_negative(x) and x < 0.5, "a float in [0, 0.5)"),
    "bias_features": (
        lambda g: isinstance(g, tuple) and len(g) > 0
        and all(isinstance(x, str) and x.strip() for x in g),
        "a non-empty tuple of feature names",
    ),
    "gamma": (non_negative, "a float >= 0"),
    "dro_groups": (lambda x: x is None or (isinstance(x, str) and x != ""), "None or a column"),
    "dro_step": (positive, "a float > 0"),
}


@dataclass
class TrainConfig(Config):
    """How a reward model is fine-tuned (DESIGN.md section 2).

    Model: ``model``, ``rm`` (explicit head or implicit DPO reward), ``finetune`` (LoRA or
    full), the LoRA shape, ``beta`` and ``max_length``. Loss: ``loss``, ``use_margin``,
    ``center_coef``. Training: epochs, batch size, accumulation, learning rates and schedule,
    evaluation split, early stopping, checkpoints, device and precision, seed.
    """

    model: str = field(
        default="minilm",
        metadata={"help": MODEL_HELP},
    )
    rm: str = field(
        default="explicit",
        metadata={
            "help": "explicit: linear head on the pooled hidden state; implicit: "
            "beta * (log pi(y|x) - log pi_ref(y|x)) of a causal LM (DPO)."
        },
    )
    finetune: str = field(
        default="lora", metadata={"help": "lora: adapters (and the head) through peft; full."}
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
    loss: str = field(
        default="bradley-terry",
        metadata={"help": "bradley-terry (pairs) or plackett-luce (rankings)."},
    )
    use_margin: bool = field(
        default=False, metadata={"help": "Bradley-Terry with margin: -log sigmoid(r+ - r- - m)."}
    )
    center_coef: float = field(
        default=0.0, metadata={"help": "Reward centering: coef * mean((r+ + r-)^2)."}
    )
    objective: str = objective_field("objective")
    smoothing: float = objective_field("smoothing")
    bias_features: tuple[str, ...] = objective_field("bias_features")
    gamma: float = objective_field("gamma")
    dro_groups: str | None = objective_field("dro_groups")
    dro_step: float = objective_field("dro_step")
    epochs: int = field(default=1, metadata={"help": "Passes over the training pairs."})
    batch_size: int = field(default=8, metadata={"help": "Pairs per forward pass."})
    grad_accum: int = field(default=1, metadata={"help": "Forward passes per optimizer step."})
    lr: float = field(default=1e-4, metadata={"help": "AdamW learning rate of the backbone."})
    head_lr: float = field(default=1e-3, metadata={"help": "Learning rate of the reward head."})
    lr_grid: tuple[float, ...] = field(
        default=(),
        metadata={
            "help": "Learning rates tried per run (each from the base weights), the one with "
            "the lowest validation loss kept; empty: --lr only. Needs validation pairs."
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
    eval_fraction: float = field(
        default=0.0,
        metadata={"help": "Share of training pairs held out to evaluate each epoch."},
    )
    patience: int = field(
        default=0,
        metadata={"help": "Early stopping: epochs without a lower eval loss (0: off)."},
    )
    save_steps: int = field(
        default=0, metadata={"help": "Checkpoint every N optimizer steps (0: each epoch)."}
    )
    packing: bool = field(
        default=True,
        metadata={"help": "Causal LMs: encode the shared prompt once per pair (block mask)."},
    )
    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:1, mps."})
    bf16: bool = field(default=False, metadata={"help": "bfloat16 mixed precision (autocast)."})
    ensemble: int = field(default=1, metadata={"help": "rmlens train: members of a seed ensemble."})
    seed: int = field(default=0, metadata={"help": "Seed of initialisation and batch order."})

    _constraints = {
        "rm": ("explicit", "implicit"),
        "finetune": ("lora", "full"),
        "lora_r": (positive_int, "an int > 0"),
        "lora_alpha": (positive, "a float > 0"),
        "lora_dropout": (unit_interval, "a float in [0, 1)"),
        "lora_targets": (lambda x: isinstance(x, str) and x.strip() != "", "a non-empty string"),
        "beta": (positive, "a float > 0"),
        "max_length": (lambda x: x is None or (positive_int(x) and x >= 2), "None or an int >= 2"),
        "loss": ("bradley-terry", "plackett-luce"),
        "use_margin": (True, False),
        "center_coef": (non_negative, "a float >= 0"),
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
        "bf16": (True, False),
        "ensemble": (positive_int, "an int > 0"),
        "seed": (non_negative_int, "an int >= 0"),
        **OBJECTIVE_CONSTRAINTS,
    }

    def _check_more(self) -> None:
        if self.loss == "plackett-luce" and self.objective != "bt":
            raise ParamError(
                "objective", type(self).__name__, "bt with loss='plackett-luce'", self.objective
            )
        if len(self.lr_grid) > 1 and not (self.patience or self.eval_fraction):
            raise ParamError(
                "lr_grid", type(self).__name__,
                "a single rate unless there are validation pairs (patience > 0 in an audit, "
                "or eval_fraction > 0)", self.lr_grid,
            )  # fmt: skip


@dataclass
class HeadConfig(Config):
    """How a reward head is built and trained on cached features.

    ``linear`` and ``mlp`` heads: AdamW with weight decay, at most ``epochs`` passes; with
    validation pairs (an audit carves them from each run's own training groups) training
    stops after ``patience`` epochs without a lower validation loss and the best epoch's
    weights are kept, so heads stop where held-out pairs say rather than interpolate their
    training pairs. Without validation pairs every epoch is trained.

    ``logistic`` (the audit's default head): the linear Bradley-Terry head with an L2 penalty,
    solved to its optimum by Newton's method (``rmlens.rewards._convex``), so a run's head
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
    use_margin: bool = field(
        default=False, metadata={"help": "Bradley-Terry with margin: -log sigmoid(r+ - r- - m)."}
    )
    center_coef: float = field(
        default=0.0, metadata={"help": "Reward centering coefficient: coef * mean((r+ + r-)^2)."}
    )
    objective: str = objective_field("objective")
    smoothing: float = objective_field("smoothing")
    bias_features: tuple[str, ...] = objective_field("bias_features")
    gamma: float = objective_field("gamma")
    dro_groups: str | None = objective_field("dro_groups")
    dro_step: float = objective_field("dro_step")
    l2_grid: tuple[float, ...] = field(
        default=L2_GRID,
        metadata={
            "help": "--head logistic: penalties lambda tried per run (objective: sum of the "
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
        "use_margin": (True, False),
        "center_coef": (non_negative, "a float >= 0"),
        "seed": (non_negative_int, "an int >= 0"),
        **OBJECTIVE_CONSTRAINTS,
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
        if self.objective == "group_dro":
            raise ParamError(
                "objective", "HeadConfig",
                "bt, label_smoothing, poe or reweight with head='logistic' (group_dro's "
                "group weights move with gradient steps; use head='linear' or 'mlp')",
                self.objective,
            )  # fmt: skip
        for name in STEP_FIELDS:
            value, default = getattr(self, name), HeadConfig.__dataclass_fields__[name].default
            if value != default:
                raise ParamError(
                    name, "HeadConfig",
                    f"left at {default!r} with the logistic head (--head logistic is solved to "
                    "its optimum by Newton's method: no steps, epochs or dropout, and lambda "
                    "from --l2-grid; --head linear or mlp train by AdamW)",
                    value,
                )  # fmt: skip


DEVICES = (
    lambda x: isinstance(x, str) and x.split(":")[0] in ("auto", "cpu", "cuda", "mps"),
    "auto, cpu, cuda, cuda:N or mps",
)


@dataclass
class ScoreConfig(Config):
    """How a saved reward model is loaded to score (``score``, ``evaluate``, ``sweep``)."""

    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:1, mps."})
    score_index: int = field(
        default=0,
        metadata={"help": "Logit read as the reward of a sequence classifier: logits[:, INDEX]."},
    )
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Run a hub classifier's own code (only models you trust)."}
    )

    _constraints = {
        "device": DEVICES,
        "score_index": (non_negative_int, "an int >= 0"),
        "trust_remote_code": (True, False),
    }


def resolve_device(name: str) -> str:
    """``auto`` -> cuda if available, else mps, else cpu."""
    import torch

    if name != "auto":
        return name
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"
