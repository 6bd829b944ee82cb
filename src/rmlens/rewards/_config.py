"""What the configs of both training modes share: the objective's fields, the model help,
devices, and the scoring config.

``HeadConfig`` (frozen features) is in ``rmlens.rewards.frozen``, ``TrainConfig``
(fine-tuning) in ``rmlens.rewards.finetune``; this module and those configs import nothing
heavy, so the command line builds its options without torch or pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import (
    Config,
    non_negative,
    non_negative_int,
    positive,
)

MODEL_HELP = "Backbone: preset (minilm, smollm2-135m), local path (a .gguf file too) or hub id."

OBJECTIVE_NAMES = ("bt", "label_smoothing", "poe", "reweight", "group_dro")
BIAS_OBJECTIVES = ("poe", "reweight")  # the objectives that read bias features
L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
# HeadConfig fields of heads trained by gradient steps: refused with head='logistic'
STEP_FIELDS = ("hidden_dim", "dropout", "lr", "epochs", "batch_size", "weight_decay",
               "patience", "center_coef")  # fmt: skip


# The loss's fields, shared by HeadConfig and TrainConfig: name -> (default, metadata)
_OBJECTIVE_FIELDS = {
    "use_margin": (False, {"help": "Bradley-Terry with margin: -log sigmoid(r+ - r- - m).",
                           "alias": "--no-margin"}),
    "center_coef": (0.0, {"help": "Reward centering: coef * mean((r+ + r-)^2)."}),
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
