"""The audit's configuration: one source of truth for the Python API and the command line."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import (
    Config,
    Nested,
    ParamError,
    non_negative,
    non_negative_int,
    positive,
    positive_int,
    unit_interval,
)
from rmlens.backbones import FORMAT_CONSTRAINT, PRECISION_CONSTRAINT, format_field, precision_field
from rmlens.data import DEDUPE
from rmlens.memorization._regime import (
    audit_head,
    audit_train,
    objective_words,
    planned_validation,
    validation_words,
)
from rmlens.rewards import MODEL_HELP, HeadConfig, TrainConfig
from rmlens.rewards.objectives import names_where, objective_of

BACKENDS = ("local", "ray")
# How and where runs execute: they never change the tables, so an audit may be resumed with
# other values of them.
EXECUTION_FIELDS = (
    "backend", "address", "cpus_per_run", "gpus_per_run", "retries", "abort_after",
    "encode_batch_size", "check_exact",
)  # fmt: skip
# Compared as resolved (config.json's ``estimator`` and ``precision``), not as typed: an unset
# estimator that resolves to brute force is the same audit as ``--estimator brute``, and
# ``auto`` that resolves to bf16 the same as ``--precision bf16``.
RESOLVED_FIELDS = ("estimator", "precision")
# When an audit with a target reliability stops adding repeats: they decide how many runs
# there are, never what a run does (the plan's first R runs are the same whatever its
# length), so an audit may be resumed with other values of them. ``runs`` is the saved
# audit's real run count; with a target now, it is where the audit starts from.
GROWTH_FIELDS = ("target_reliability", "max_runs")
MAX_RUNS = 200  # default cap of an audit with a target reliability
ESTIMATORS = ("paired", "brute")
CHECK_EXACT = 1  # groups refitted exactly per run of a paired audit, unless told otherwise


@dataclass
class AuditConfig(Config):
    """A counterfactual memorization audit (DESIGN.md section 3).

    ``model``, ``max_length``, ``format`` and ``seed`` are the audit's own: they apply to
    every run's trainer (``head`` in frozen mode, ``train`` in finetune mode; run r's seed is
    drawn from ``seed`` and r). The nested configs may leave these fields at their defaults
    or repeat the audit's value; another value is refused by :meth:`check`
    (``ParamConflict``).
    """

    model: str = field(
        default="minilm",
        metadata={"help": MODEL_HELP},
    )
    runs: int = field(
        default=25,
        metadata={
            "help": "Training runs R (repeats x folds); at least 2. With "
            "--target-reliability: the runs to start from, rounded up to whole repeats."
        },
    )
    folds: int = field(default=5, metadata={"help": "K of the repeated grouped K-fold plan."})
    plan: str = field(default="kfold", metadata={"help": "Run plan: kfold or halves."})
    group_by: str | None = field(
        default=None,
        metadata={"help": "Grouping column (default: user_id if present, else the prompt)."},
    )
    dedupe: str = field(
        default="none",
        metadata={
            "help": "Repeated data across groups, which makes TG optimistic (a held-out pair "
            "seen through another group's copy). none: audit the data as given (warned "
            "about); pairs: keep the first row of each repeated (prompt, chosen, rejected), "
            "pairs judged the other way kept (the disagreement signal); texts: keep every "
            "pair and join the groups that share a response (with its prompt) into one group."
        },
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the plan, the heads and the bootstrap."}
    )
    target_reliability: float | None = field(
        default=None,
        metadata={
            "help": "Add whole repeats of the plan until the split-half reliability of CM "
            "(Spearman-Brown, mean over splits) reaches this value in (0, 1), or --max-runs.",
            "unset": "none: --runs runs, no more",
        },
    )
    max_runs: int = field(
        default=MAX_RUNS,
        metadata={
            "help": "Most runs a --target-reliability audit grows to (whole repeats: rounded "
            "down to a multiple of the runs per repeat)."
        },
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Tokens per prompt+response.", "unset": "the model's limit"}
    )
    format: str = format_field()
    precision: str = precision_field()
    encode_batch_size: int = field(default=32, metadata={"help": "Texts per encoding batch."})
    n_boot: int = field(default=1000, metadata={"help": "Bootstrap resamples over runs."})
    cm_threshold: float = field(
        default=0.1, metadata={"help": "CM at or above which a pair counts as memorized."}
    )
    val_fraction: float = field(
        default=0.2,
        metadata={
            "help": "Share of each run's training groups set aside as validation pairs for "
            "early stopping (--patience > 0): never trained on, counted neither in nor out "
            "of that run."
        },
    )
    estimator: str | None = field(
        default=None,
        metadata={
            "help": "paired: every run also scores each pair with its group removed (if in) "
            "or added (if out), so every run counts for every pair: a Newton step of the "
            "convex head (--head logistic, exact), or influence with a calibrated damping "
            "(--head linear/mlp: last-layer; --mode finetune with an explicit RM: "
            "--influence; objective bt or label_smoothing); brute: compare a pair's in-runs "
            "with its out-runs (any head or mode).",
            "unset": "paired with --head logistic unless one group holds more than a tenth "
            "of a run's training pairs, else brute",
        },
    )
    check_exact: int | None = field(
        default=None,
        metadata={
            "help": "Paired estimator with --head logistic: per run, refit the head exactly "
            "with this many random groups removed or added, and report how far the "
            "counterfactuals are from the refits (0: no check).",
            "unset": f"{CHECK_EXACT} with the paired estimator",
        },
    )
    head: HeadConfig = field(default_factory=audit_head)
    mode: str = field(
        default="frozen",
        metadata={
            "help": "frozen: features once, one head per run (CPU); finetune: each run "
            "fine-tunes the backbone from its base weights (LoRA or full, for a GPU)."
        },
    )
    train: TrainConfig = field(default_factory=lambda: audit_train())
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

    # The trainer of the mode: the audit's model, max_length, format, precision and seed are
    # used for every run (each run's seed is drawn from the audit's), so the nested configs
    # may only leave them at their defaults or repeat them; a run is one RM, never an ensemble,
    # and its validation pairs are whole groups (val_fraction), never train's eval_fraction.
    _nested = {
        "head": Nested(when=("mode", "frozen"), shared=("seed",)),
        "train": Nested(
            when=("mode", "finetune"),
            shared=("model", "max_length", "format", "precision", "seed"),
            owned=("ensemble", "eval_fraction"),
        ),
    }
    _constraints = {
        "model": (lambda x: isinstance(x, str) and x.strip() != "", "a non-empty string"),
        "runs": (
            lambda r: positive_int(r) and r >= 2,
            "an int >= 2 (TM and TG need runs that train on a pair and runs that hold it out)",
        ),
        "folds": (lambda k: positive_int(k) and k >= 2, "an int >= 2"),
        "plan": ("kfold", "halves"),
        "group_by": (lambda x: x is None or (isinstance(x, str) and x != ""), "None or a column"),
        "dedupe": DEDUPE,
        "seed": (non_negative_int, "an int >= 0"),
        "target_reliability": (
            lambda x: x is None or (non_negative(x) and 0 < x < 1),
            "None or a float in (0, 1)",
        ),
        "max_runs": (lambda r: positive_int(r) and r >= 2, "an int >= 2"),
        "max_length": (lambda x: x is None or (positive_int(x) and x >= 2), "None or an int >= 2"),
        "format": FORMAT_CONSTRAINT,
        "precision": PRECISION_CONSTRAINT,
        "encode_batch_size": (positive_int, "an int > 0"),
        "n_boot": (non_negative_int, "an int >= 0"),
        "cm_threshold": (non_negative, "a float >= 0"),
        "estimator": (lambda x: x is None or x in ESTIMATORS, "None, 'paired' or 'brute'"),
        "check_exact": (lambda x: x is None or non_negative_int(x), "None or an int >= 0"),
        "val_fraction": (unit_interval, "a float in [0, 1)"),
        "mode": ("frozen", "finetune"),
        "backend": BACKENDS,
        "cpus_per_run": (positive, "a number > 0"),
        "gpus_per_run": (non_negative, "a number >= 0"),
        "retries": (non_negative_int, "an int >= 0"),
        "abort_after": (positive_int, "an int > 0"),
    }

    def _check_more(self) -> None:
        for name in ("address", "gpus_per_run"):
            value = getattr(self, name)
            if value and self.backend != "ray":
                raise ParamError(
                    name,
                    "AuditConfig",
                    "unset unless backend='ray'",
                    value,
                    message=(
                        f"The '{name}' parameter of AuditConfig applies to backend='ray' only. "
                        f"Got {name}={value!r} with backend={self.backend!r}."
                    ),
                )
        self._check_shared()
        self._check_validation()
        self._check_growth()
        self._check_estimator()

    def exact_checks(self, estimator: str) -> int:
        """Groups refitted per run to check the counterfactuals, with ``estimator``.

        Parameters
        ----------
        estimator : str
            The estimator the audit resolved to (``"paired"`` or ``"brute"``).

        Returns
        -------
        int
            ``check_exact`` (default 1) for a paired audit whose head can be refitted
            exactly; 0 otherwise.
        """
        if estimator != "paired" or not self.pairable:
            return 0
        return CHECK_EXACT if self.check_exact is None else self.check_exact

    @property
    def counterfactuals(self) -> str | None:
        """How the runs can give paired counterfactuals: ``"newton"`` (frozen, the convex
        head: exact Newton steps), ``"last-layer"`` (an AdamW head, or a fine-tuned explicit
        RM on pairs with ``influence`` last-layer) or ``"gauss-newton"`` (a fine-tuned
        explicit RM on pairs, through its LoRA adapters and head), trained with ``bt`` or
        ``label_smoothing``; or None."""
        if self.mode == "frozen":
            if self.head.convex:
                return "newton"
            return "last-layer" if objective_of(self.head).pair_logistic else None
        t = self.train
        pairwise = t.rm_kind == "explicit" and t.loss == "bradley-terry"
        return t.influence if pairwise and objective_of(t).pair_logistic else None

    @property
    def pairable(self) -> bool:
        """Whether paired counterfactuals are exact here (the default estimator then)."""
        return self.counterfactuals == "newton"

    def _where(self) -> str:
        if self.mode == "frozen":
            return f"`mode` frozen, `head` {self.head.head}, `objective` {self.head.objective}"
        t = self.train
        return f"`mode` finetune, `rm_kind` {t.rm_kind}, `loss` {t.loss}, `objective` {t.objective}"

    def _check_estimator(self) -> None:
        here = self._where()
        if self.estimator == "paired" and not self.counterfactuals:
            raise ParamError(
                "estimator", "AuditConfig",
                f"brute or unset with {here} (paired needs the convex head, or an explicit RM "
                f"on pairs trained with objective {' or '.join(names_where('pair_logistic'))})",
                self.estimator,
                message=(
                    f"`estimator` paired does not apply here ({here}): it needs `head` "
                    "logistic (exact Newton steps), or an explicit RM on pairs (`head` "
                    "linear/mlp, or `mode` finetune `rm_kind` explicit `loss` bradley-terry) "
                    f"trained with `objective` {' or '.join(names_where('pair_logistic'))} "
                    "(influence); use `estimator` brute"
                ),
            )  # fmt: skip
        if self.check_exact and (self.estimator == "brute" or not self.pairable):
            raise ParamError(
                "check_exact", "AuditConfig",
                f"0 with {here}" + (", `estimator` brute" if self.estimator == "brute" else "")
                + " (it checks the paired estimator's counterfactuals)", self.check_exact,
                message=(
                    "`check_exact` applies to the paired estimator of the convex head only "
                    f"(`mode` frozen, `head` logistic, `estimator` paired or unset; here {here}"
                    + (", `estimator` brute" if self.estimator == "brute" else "") + ")"
                ),
            )  # fmt: skip

    def _check_growth(self) -> None:
        if self.target_reliability is None and self.max_runs != MAX_RUNS:
            raise ParamError(
                "max_runs",
                "AuditConfig",
                f"left at {MAX_RUNS} unless `target_reliability` is set",
                self.max_runs,
                message=(
                    "The 'max_runs' parameter of AuditConfig applies with target_reliability "
                    f"only. Got max_runs={self.max_runs} with target_reliability=None."
                ),
            )
        if self.target_reliability is not None and self.max_runs < self.runs:
            raise ParamError(
                "max_runs",
                "AuditConfig",
                f"at least `runs` ({self.runs}) when `target_reliability` is set",
                self.max_runs,
                message=(
                    f"`max_runs` {self.max_runs} is below `runs` {self.runs}: an audit with "
                    "`target_reliability` starts with `runs` runs and adds whole repeats up to "
                    "`max_runs`; raise `max_runs` or lower `runs`"
                ),
            )

    @property
    def patience(self) -> int:
        """Early-stopping patience of the mode's trainer (``head`` or ``train``); 0 for the
        logistic head, which is solved, not stopped."""
        if self.mode == "frozen":
            return 0 if self.head.convex else self.head.patience
        return self.train.patience

    @property
    def reads_validation(self) -> bool:
        """Whether the runs' training makes a choice on validation pairs: early stopping,
        or the logistic head's lambda."""
        return self.head.validates if self.mode == "frozen" else self.train.patience > 0

    @property
    def deterministic(self) -> bool:
        """Whether a run's RM is a function of its training set alone: the logistic head,
        solved to its optimum (no seed, no order)."""
        return self.mode == "frozen" and self.head.convex

    @property
    def validates(self) -> bool:
        """Whether each run sets validation groups aside (its choices need them)."""
        return self.val_fraction > 0 and self.reads_validation

    def regime(self) -> str:
        """The training regime of every run, in words (``config.json``'s ``regime``).

        Returns
        -------
        str
            One sentence: the features or model trained, the head or fine-tuning, its
            optimizer and how each run chooses (lambda, early stopping).
        """
        return regime_words(self)

    def _check_validation(self) -> None:
        # Membership rule (DESIGN.md section 3): a pair is in a run only if the run's RM took
        # gradients on it, and a run's choices may look only at validation pairs carved from
        # its own training groups. Early stopping without them, or fine-tuning's pair-level
        # eval split (pairs of the run's training groups that it never trains on), is refused.
        nested = "head" if self.mode == "frozen" else "train"
        if self.mode == "frozen" and self.head.convex and self.head.validates:
            if not self.val_fraction:
                raise ParamError(
                    "val_fraction", "AuditConfig", "a float in (0, 1) with head='logistic' "
                    "and more than one l2_grid value", self.val_fraction,
                    message=(
                        "`val_fraction` must be > 0 with `head` logistic and "
                        f"{len(self.head.l2_grid)} `l2_grid` values: lambda is chosen on "
                        "validation pairs. Set `val_fraction` > 0, or give one `l2_grid` value."
                    ),
                )  # fmt: skip
            return
        if self.patience and not self.val_fraction:
            raise ParamError(
                "val_fraction",
                "AuditConfig",
                f"a float in (0, 1) when {nested}.patience > 0",
                self.val_fraction,
                message=(
                    f"The 'val_fraction' parameter of AuditConfig must be > 0 when "
                    f"{nested}.patience={self.patience}: early stopping needs validation "
                    "pairs. Set val_fraction > 0, or patience=0 to train every epoch."
                ),
            )

    def resolved(self) -> AuditConfig:
        """A copy whose ``head`` and ``train`` carry the audit's shared settings (model,
        max_length, format, precision, seed: ``_nested``).

        What the runs use (each run still draws its own seed from ``seed``), and what
        ``config.json`` records.

        Returns
        -------
        AuditConfig
            The copy.
        """
        shared = {nested: {name: getattr(self, name) for name in spec.shared}
                  for nested, spec in self._nested.items()}  # fmt: skip
        shared["train"]["eval_fraction"] = 0.0  # validation groups come from val_fraction
        return self.replace(**shared)


def regime_words(config: AuditConfig, *, n_groups: int | None = None,
                 folds: int | None = None) -> str:  # fmt: skip
    """The training regime of every run of ``config``, in words (``config.json``'s ``regime``).

    With ``n_groups`` (and the ``folds`` the plan used, default ``config.folds``) the
    validation groups are counted as the plan draws them (``validation_words``); without,
    the share is stated with its rounding rule.
    """
    share = validation_words(
        config.val_fraction,
        None if n_groups is None else planned_validation(
            n_groups, kind=config.plan, folds=folds or config.folds,
            fraction=config.val_fraction),
    )  # fmt: skip
    if config.mode == "frozen" and config.head.convex:
        grid = ", ".join(f"{x:g}" for x in config.head.l2_grid)
        what = (
            f"frozen {config.model} features, one logistic head per run: linear "
            "Bradley-Terry with an L2 penalty solved to its optimum (Newton's method), "
            f"lambda from {{{grid}}}"
        )
    elif config.mode == "frozen":
        h = config.head
        what = (
            f"frozen {config.model} features, one {h.head} head per run: AdamW lr {h.lr:g}, "
            f"weight decay {h.weight_decay:g}, batch {h.batch_size}, at most {h.epochs} epochs"
        )
    else:
        t = config.train
        what = (
            f"{config.model} fine-tuned ({t.finetune}, {t.rm_kind} RM) per run: lr {t.lr:g}, "
            f"head lr {t.head_lr:g}, weight decay {t.weight_decay:g}, at most {t.epochs} "
            "epochs"
        )
    what += objective_words(config.head if config.mode == "frozen" else config.train)
    if config.mode == "frozen" and config.head.convex:
        if not config.validates:
            return what + "; the largest lambda (no validation pairs)"
        return what + (
            f", the one with the lowest validation loss on validation pairs from {share}, "
            "never from its held-out groups; a run trains only on its other training pairs, "
            "and its validation pairs count neither in nor out"
        )
    if not config.validates:
        return what + "; every epoch trained (no early stopping, no validation pairs)"
    return what + (
        f"; early stopping with patience {config.patience} on the validation loss of "
        f"validation pairs from {share}, never from its held-out groups, keeping the best "
        "epoch's weights; a run takes gradients only on its other training pairs, and its "
        "validation pairs count neither in nor out"
    )
