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
from rmlens.backbones._formats import FORMAT_CONSTRAINT, format_field

SCORE_FORMAT_HELP = (
    "How the RM tokenizes a prompt and response: auto keeps its own (an rmlens RM: the "
    "format it was trained with; a Hugging Face classifier: its config's rmlens_format, else "
    "chat when its tokenizer has a template, else raw for causal LMs and pair for encoders); "
    "chat (the chat template), raw (prompt + response + EOS, as TRL's text path) or pair "
    "score in that format instead. The resolved one is recorded with the output."
)

MODEL_HELP = "Backbone: preset (minilm, smollm2-135m), local path (a .gguf file too) or hub id."

OBJECTIVE_NAMES = ("bt", "label_smoothing", "poe", "reweight", "group_dro", "low_margin",
                   "complementary", "curate")  # fmt: skip
BIAS_OBJECTIVES = ("poe", "reweight")  # the objectives that read bias features
GUIDED_OBJECTIVES = ("complementary", "curate")  # loss weights from a nested audit
# per-pair loss weights, and the objectives that read the pairs' groups
WEIGHTED_OBJECTIVES = ("reweight", "low_margin", *GUIDED_OBJECTIVES)
GROUP_OBJECTIVES = ("group_dro", *GUIDED_OBJECTIVES)
DRO_STEP = {"steps": 0.01, "convex": 0.5}  # group_dro's default step: per batch, per solve
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
        "--dro-groups); low_margin (loss weights 2 - q, q the margin's rank quantile: the "
        "no-audit baseline); complementary (weights (2 - q)(1 - TG)^gamma, TG from a nested "
        "paired audit inside the run's training groups); curate (weight --curate-weight for "
        "the pairs that audit finds not learned even when trained on: in-run TM < 0.5)."
    }),
    "smoothing": (0.1, {"help": "label_smoothing: eps, the assumed label-flip rate."}),
    "bias_features": (("len_words", "compliance", "model", "refusal"), {
        "help": "poe and reweight: shortcut features of the bias-only model, phi(chosen) - "
        "phi(rejected): registered response features (rmlens attribute --list-features) or "
        "'model' (model identity, from chosen_model and rejected_model)."
    }),
    "gamma": (1.0, {"help": "reweight: exponent of (1 - sigmoid(d_bias)); complementary: "
                            "exponent of (1 - TG)."}),
    "dro_groups": (None, {"help": "group_dro: column of the groups; complementary and curate: "
                          "the groups of their nested audit.",
                          "unset": "user_id, else the prompt"}),
    "dro_step": (None, {"help": "group_dro: step size of the group weights (exponentiated "
                        "gradient): per batch for gradient-step heads, per solve for the "
                        "logistic head.", "unset": "0.01 per batch, 0.5 per solve"}),
    "guide_folds": (4, {"help": "complementary and curate: folds of the nested paired audit "
                        "over the run's own training groups."}),
    "curate_weight": (0.0, {"help": "curate: loss weight of the pairs not learned even when "
                            "trained on (0 drops them)."}),
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
    "dro_step": (lambda x: x is None or positive(x), "None or a float > 0"),
    "guide_folds": (lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 2,
                    "an int >= 2"),
    "curate_weight": (lambda x: non_negative(x) and x <= 1, "a float in [0, 1]"),
}


def dro_step(config, convex: bool) -> float:
    """group_dro's step size: the config's, else the default of its kind of head."""
    if config.dro_step is not None:
        return float(config.dro_step)
    return DRO_STEP["convex" if convex else "steps"]


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
    format: str = format_field(SCORE_FORMAT_HELP)

    _constraints = {
        "device": DEVICES,
        "score_index": (non_negative_int, "an int >= 0"),
        "trust_remote_code": (True, False),
        "format": FORMAT_CONSTRAINT,
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


@dataclass
class ExportConfig(Config):
    """What ``export`` writes out of an RM folder or an audit (``rmlens export``)."""

    run: str | None = field(
        default=None,
        metadata={"help": "For an audit or an ensemble: the run (member) to export, e.g. 000."},
    )
