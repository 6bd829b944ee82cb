"""The audit's configuration: one source of truth for the Python API and the command line."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from rmlens.rewards._config import HeadConfig, TrainConfig
from rmlens.rewards._params import check_params, non_negative, positive, positive_int

BACKENDS = ("local", "ray")
# How and where runs execute: they never change the tables, so an audit may be resumed with
# other values of them.
EXECUTION_FIELDS = ("backend", "address", "cpus_per_run", "gpus_per_run", "retries", "abort_after")


@dataclass
class AuditConfig:
    """A counterfactual memorization audit (DESIGN.md section 3)."""

    model: str = field(
        default="minilm", metadata={"help": "Backbone: preset (minilm), local path or hub id."}
    )
    runs: int = field(default=25, metadata={"help": "Training runs R (repeats x folds)."})
    folds: int = field(default=5, metadata={"help": "K of the repeated grouped K-fold plan."})
    plan: str = field(default="kfold", metadata={"help": "Run plan: kfold or halves."})
    group_by: str | None = field(
        default=None,
        metadata={"help": "Grouping column (default: user_id if present, else the prompt)."},
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the plan, the heads and the bootstrap."}
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Tokens per prompt+response (default: the model's)."}
    )
    batch_size: int = field(default=32, metadata={"help": "Texts per encoding batch."})
    n_boot: int = field(default=1000, metadata={"help": "Bootstrap resamples over runs."})
    cm_threshold: float = field(
        default=0.1, metadata={"help": "CM at or above which a pair counts as memorized."}
    )
    head: HeadConfig = field(default_factory=HeadConfig)
    mode: str = field(
        default="frozen",
        metadata={
            "help": "frozen: features once, one head per run (CPU); finetune: each run "
            "fine-tunes the backbone from its base weights (LoRA or full, for a GPU)."
        },
    )
    train: TrainConfig = field(default_factory=TrainConfig)
    backend: str = field(
        default="local",
        metadata={"help": "Where runs train: local (this process) or ray (one Ray task per run)."},
    )
    address: str | None = field(
        default=None,
        metadata={"help": "Ray cluster address (default: a local Ray started for the audit)."},
    )
    cpus_per_run: float = field(default=1.0, metadata={"help": "CPUs a Ray run reserves."})
    gpus_per_run: float = field(default=0.0, metadata={"help": "GPUs a Ray run reserves."})
    retries: int = field(
        default=2, metadata={"help": "Times a failing run is tried again before it is reported."}
    )
    abort_after: int = field(
        default=3,
        metadata={
            "help": "Stop (re-raising the error) when this many runs in a row failed for good."
        },
    )

    def check(self) -> None:
        check_params(
            self,
            {
                "runs": (positive_int, "an int > 0"),
                "folds": (lambda k: positive_int(k) and k >= 2, "an int >= 2"),
                "plan": ("kfold", "halves"),
                "mode": ("frozen", "finetune"),
                "n_boot": (lambda n: isinstance(n, int) and n >= 0, "an int >= 0"),
                "batch_size": (positive_int, "an int > 0"),
                "backend": BACKENDS,
                "cpus_per_run": (positive, "a number > 0"),
                "gpus_per_run": (non_negative, "a number >= 0"),
                "retries": (lambda n: type(n) is int and n >= 0, "an int >= 0"),
                "abort_after": (positive_int, "an int > 0"),
            },
        )
        for name in ("address", "gpus_per_run"):
            if getattr(self, name) and self.backend != "ray":
                raise ValueError(
                    f"The '{name}' parameter of AuditConfig applies to backend='ray' only. "
                    f"Got {name}={getattr(self, name)!r} with backend={self.backend!r}."
                )
        check_params(self.head, HeadConfig._constraints)
        if self.mode == "finetune":
            self.train.replace(model=self.model, max_length=self.max_length).check()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> AuditConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown AuditConfig keys: {sorted(unknown)}")
        head = HeadConfig(**data.get("head", {}))
        train = TrainConfig.from_dict(data.get("train", {}))
        return cls(**{**data, "head": head, "train": train})
