"""The one-checkpoint audit: TM, TG and CM of every pair from an RM's single training run.

An RM trained on all the pairs is one run in which every group is in (its own evaluation
split aside: read by its early stopping, so neither in nor out). Each group's removal,
a Gauss-Newton step through the RM's trained parameters (LoRA adapters and head, or every
weight of a full fine-tune)
(``rmlens.influence.gauss_newton_counterfactuals``), gives its pairs' out-side:
TM_i = p_i, TG_i = p_i with i's group removed, CM_i = TM_i - TG_i, the paired estimator of
one run. No brute force exists to calibrate the damping on; the RM's own evaluation split
takes its place (its pairs are the out-side whose mean the removed groups' TG must match),
else the benchmark's value (``CHECKPOINT_DAMPING``). The summary states how far
one-checkpoint CM agreed on the benchmark with a multi-run paired audit (``STANDING``).
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from rmlens._errors import InputError
from rmlens.backbones import portable_name, precision_note, resolve_precision
from rmlens.data import data_sha1
from rmlens.experiment import AuditDir
from rmlens.influence import DAMPING
from rmlens.memorization._check_runs import run_check
from rmlens.memorization._config import AuditConfig
from rmlens.memorization._damping import calibrate_on_held
from rmlens.memorization._directory import check_resume, group_pairs, make_record, output_errors
from rmlens.memorization._finish import finish
from rmlens.memorization._notes import (
    BLOCKS_STANDING,
    CHECKPOINT_DAMPING,
    STANDING,
    reading_times,
    say_summary,
)
from rmlens.memorization._plans import write_plan
from rmlens.memorization._quality import run_quality
from rmlens.memorization._regime import checkpoint_regime
from rmlens.memorization._run_folders import RunOutput, write_run
from rmlens.progress import progress_bar, status
from rmlens.rewards import TrainConfig, eval_split, group_codes, resolve_device


def trained_record(rm: Path) -> tuple[dict, dict]:
    """The RM's ``rm_config.json`` and the ``train.json`` of its training; refuses, in one
    line, an RM whose training pairs cannot be matched."""
    config, train = rm / "rm_config.json", rm / "train.json"
    saved = json.loads(config.read_text())
    if saved.get("kind") != "explicit_finetuned":
        raise InputError(
            f"`rm` {rm}: an RM of kind {saved.get('kind')}; the one-checkpoint audit runs "
            "through the trained parameters of one fine-tuned explicit RM (`rmlens train`)"
        )
    if not train.is_file():
        raise InputError(
            f"`rm` {rm}: no train.json, so the pairs it was trained on cannot be matched "
            "(the one-checkpoint audit needs the RM's own training record)"
        )
    return saved, json.loads(train.read_text())


def audit_rm(
    pairs: pd.DataFrame,
    rm: str | Path,
    config: AuditConfig | None = None,
    *,
    out: str | Path,
    damping: float | None = None,
    blocks: int | None = None,
    eval_data: pd.DataFrame | None = None,
    check_runs: int = 0,
    device: str = "auto",
    quiet: bool = False,
) -> pd.DataFrame:
    """Audit an existing fine-tuned RM from its one training run.

    Parameters
    ----------
    pairs : DataFrame
        Exactly the pairs the RM was trained on (their fingerprint is checked against an
        rmlens RM's ``train.json``; for an RM trained elsewhere it cannot be, and the
        summary warns so).
    rm : str or Path
        A folder written by ``rmlens train`` (explicit RM, LoRA or full), or a Hugging Face
        causal classifier RM (whole, or a PEFT LoRA adapter on one) trained elsewhere.
    config : AuditConfig, optional
        Grouping (``group_by``), ``n_boot``, ``cm_threshold``; the training settings are
        the RM's own.
    out : str or Path
        The audit directory (the usual files, one run).
    damping : float, optional
        Damping of the Gauss-Newton step, relative to tr(G) / min(q, n). Default: the value
        at which the trained pairs' mean TG equals the mean p of the RM's own evaluation
        pairs (never trained on); ``CHECKPOINT_DAMPING``, the benchmark's, when it has none.
    blocks : int, optional
        Read the gradients through the linear layers of the RM's last ``blocks``
        transformer blocks and its head only (``rmlens.influence.through_last``): a
        cheaper reading of a full or merged RM, whose every weight takes one backward pass
        per pair. Default: every trained tensor.
    eval_data : DataFrame, optional
        Pairs the RM never saw, for an RM without an evaluation split of its own (one
        trained elsewhere, or by ``rmlens train`` with ``eval_fraction`` 0): the damping is
        calibrated on them as on an rmlens RM's evaluation split, and their accuracy is the
        RM's held-out standing. They are scored, never removed, and categorized
        ``undefined``.
    check_runs : int, default=0
        K >= 2: measure the audit's standing on these pairs. K paired fine-tuned runs in
        the RM's own regime (its training record; for an RM from elsewhere, ``config.train``
        on its adapter's base or ``config.model``) are audited into ``out/check``, and
        ``summary.json``'s ``check`` gives one-checkpoint TM, TG and CM's agreement with
        them, CM's share of what their reliability allows, and both audits' links
        (``_check_runs``). Costs about K trainings of the RM plus K readings like this one.
    device : str, default="auto"
        Where the gradients are computed.
    quiet : bool, default=False
        No status lines.

    Returns
    -------
    DataFrame
        The memorization table, as :func:`rmlens.memorization.audit` returns it.
    """
    # lazy: torch, transformers load only when this runs
    from rmlens.influence import through_last
    from rmlens.rewards import influence_scores

    # private: the fine-tuned loop's own tokenized examples, rewards' torch internals
    from rmlens.rewards._packing import examples_of

    folder = Path(rm)
    damping = None if damping is None else float(damping)
    given = config = config or AuditConfig()
    ckpt = (_RmlensRM(folder, pairs) if (folder / "rm_config.json").is_file()
            else _ClassifierRM(folder, config, pairs))  # fmt: skip
    if blocks is not None and blocks < 1:
        raise InputError(f"`blocks`: {blocks}; expected a number of blocks, 1 or more")
    config = _config_of(config, ckpt.train)
    n_trained = len(pairs)
    if eval_data is not None:
        pairs = _with_eval(pairs, eval_data, ckpt, folder)
    # read as it scores (fp32 under auto): its rewards must match the classifier's own
    precision = resolve_precision(config.precision, resolve_device(device), task="score")
    grouping = group_pairs(pairs.iloc[:n_trained], config, plan=False)
    if eval_data is not None:  # one group of their own, never removed
        grouping.groups = pd.concat([grouping.groups, pd.Series(
            [EVAL_GROUP] * (len(pairs) - n_trained), name=grouping.groups.name)],
            ignore_index=True)  # fmt: skip
    grouping.note += (f"; {grouping.groups.nunique()} groups, each removed in turn from its "
                      "one training")  # fmt: skip
    exp = AuditDir(out)
    how_one = ("given" if damping is not None  # the damping of a one-value grid, in words
               else "no evaluation split to calibrate on: the benchmark's value")  # fmt: skip
    how = (f"{damping:g} x tr(G)/min(q, n)" if damping is not None
           else f"calibrated on {ckpt.eval_words}" if ckpt.has_eval
           else f"{CHECKPOINT_DAMPING:g} x tr(G)/min(q, n), the benchmark's value (it has no "
                "evaluation split to calibrate on)")  # fmt: skip
    through = ckpt.trained if blocks is None else (
        f"the linear layers of its last {blocks} blocks and its head (of {ckpt.trained}: a "
        "cheaper reading)")  # fmt: skip
    note = (f"one checkpoint ({folder}): each group removed by a Gauss-Newton step through "
            f"{through}, damping {how}")  # fmt: skip
    record = make_record(pairs, config, grouping, "paired", note)
    record["regime"] = f"{checkpoint_regime(ckpt)}; estimator {note}"
    record["precision"] = precision
    # the RM by its resolved path (the same folder typed two ways is one audit); a hub id
    # stays as typed
    record["checkpoint"] = {"rm": portable_name(str(folder)), "damping": damping, "blocks": blocks,
                            "standing": STANDING, "training_pairs": ckpt.pairs_note,
                            "eval_pairs": len(pairs) - n_trained or None}  # fmt: skip
    with output_errors(exp):
        saved = check_resume(exp, record)
    # what was audited; its standing is words
    which = ("rm", "damping", "blocks", "training_pairs", "eval_pairs")
    was = {k: (saved.get("checkpoint") or {}).get(k) for k in which} if saved else {}
    if was.get("rm") == str(folder):  # saved before RMs were named by their resolved path
        was["rm"] = record["checkpoint"]["rm"]
    if saved is not None and was != {
            k: json.loads(json.dumps(record["checkpoint"][k])) for k in which}:  # fmt: skip
        raise InputError(
            f"`out` {exp.path} holds the audit of another checkpoint, damping or blocks "
            f"({saved.get('checkpoint')}); use another `out`"
        )
    if saved is None or not exp.run_done(0):
        start = time.perf_counter()
        if not quiet:
            scored = (f" ({len(pairs) - n_trained} evaluation pairs scored)"
                      if len(pairs) > n_trained else "")  # fmt: skip
            status(f"{folder}: gradients of {n_trained} pairs through {through}{scored}; "
                   + precision_note(config.precision, resolve_device(device), task="score"))
        net, backbone, runtime = ckpt.load(device, precision)
        if blocks is not None:
            try:
                through_last(net, blocks)
            except ValueError as err:
                raise InputError(f"`rm` {folder}: --checkpoint-blocks needs blocks: {err}") from err
        examples, kept = examples_of(pairs, backbone, ckpt.train, implicit=False)
        examples = ckpt.as_read(examples)
        usable = np.flatnonzero(kept)
        fit, held = (ckpt.split(usable) if eval_data is None
                     else (usable[usable < n_trained], usable[usable >= n_trained]))  # fmt: skip
        margin = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        grid = ((damping,) if damping is not None else DAMPING if len(held)
                else (CHECKPOINT_DAMPING,))  # fmt: skip
        if not quiet and blocks is None and ckpt.trained == "every weight" and len(fit):
            status(reading_times(net, [examples[i] for i in fit[:2]], runtime, len(fit),
                                 folder))  # fmt: skip
        with progress_bar("gradients", total=len(fit), quiet=quiet) as advance:
            r, (p, p_cf, _) = influence_scores(net, examples, kept, runtime, ckpt.train,
                                               group_codes(grouping.groups), fit, held,
                                               margin=margin, damping=grid,
                                               advance=advance)  # fmt: skip
        ckpt.check(pairs, r, kept)
        p_cf, chosen = calibrate_on_held(p, p_cf, fit, held, grid, how_one, ckpt.eval_words)
        member = np.zeros(len(pairs), bool)
        member[fit] = True
        val = np.zeros(len(pairs), bool)
        val[held] = True
        names = pd.unique(grouping.groups.astype(str))
        plan = pd.DataFrame({"run": 0, "group": names, "in_train": names != EVAL_GROUP,
                             "validation": names == EVAL_GROUP})  # fmt: skip
        record["format"] = backbone.format
        with output_errors(exp):
            write_plan(exp, record, plan, 1)
        ids = pairs.id.to_numpy()
        manifest = {
            "run": 0, "seed": ckpt.train.seed, "n_train": int(len(fit)),
            "train_ids": ids[fit].tolist(), "n_val": int(len(held)),
            "val_ids": ids[held].tolist(), "estimator": "paired",
            "quality": run_quality(np.where(kept, p, np.nan), kept & member, kept & val),
            "metrics": {"influence_seconds": time.perf_counter() - start, **chosen},
        }  # fmt: skip
        output = RunOutput(r[:, 0], r[:, 1], manifest["metrics"], None, p, p_cf)
        with output_errors(exp):
            write_run(exp, 0, ids, kept, output, manifest)
    with output_errors(exp):
        table = finish(pairs, grouping.groups, config, exp, quiet=quiet)
        summary = exp.read_json("summary.json")
        summary["checkpoint"] = {**record["checkpoint"], **{
            k: v for k, v in exp.manifest(0)["metrics"].items() if k.startswith("damping")}}
        summary["reliability"]["reason"] = (
            "one training run, so no split-half reliability; its standing instead, not "
            f"measured on this data (`check_runs` measures it), the benchmark's: {STANDING}"
            + (f"; {BLOCKS_STANDING}" if blocks is not None else "")
        )  # fmt: skip
        if check_runs:
            summary["check"] = run_check(pairs.iloc[:n_trained], table, summary, given, ckpt,
                                         check_runs, exp.path, quiet=quiet)  # fmt: skip
            summary["reliability"]["reason"] = (
                "one training run, so no split-half reliability; its standing on this data "
                f"comes from {check_runs} check runs instead (`check`)")  # fmt: skip
        n_val = int(exp.manifest(0).get("n_val", 0))
        summary["validation"].update(
            used=bool(n_val), pairs_words=f"{ckpt.eval_words} ({n_val} pairs, never trained on)",
            given=eval_data is not None,
        )  # fmt: skip
        if not n_val and damping is None:
            summary["warnings"].append({"code": "checkpoint_uncalibrated", "message": (
                "CM is uncalibrated: the RM has no pairs it never saw to calibrate the "
                f"Gauss-Newton step on, so its damping is the benchmark's ({CHECKPOINT_DAMPING:g})"
                " and CM's size is that value's; rank pairs by CM, and give `eval_data` (pairs "
                "the RM never saw) to calibrate it")})  # fmt: skip
        if ckpt.unchecked:
            summary["warnings"].append({"code": "checkpoint_pairs_unchecked",
                                        "message": ckpt.pairs_note})  # fmt: skip
            dropped = pairs.attrs.get("dropped")
            if dropped:
                summary["warnings"].append({"code": "checkpoint_trained_on_dropped", "message": (
                    f"the RM was trained on the data as given, {dropped['n']} row(s) of which "
                    "the audit left out (`drop_invalid`, or chosen and rejected the same "
                    "text): their pairs get no TM, TG or CM, and what the RM learned from "
                    "them stays in every group's reading"
                )})  # fmt: skip
        edge = summary["checkpoint"].get("damping_edge")
        if edge:
            summary["warnings"].append({"code": "checkpoint_damping_edge", "message": (
                f"the one-checkpoint damping sits at the grid's {edge} value, so CM's size is "
                "the grid's limit, not calibrated: rank pairs by CM, but do not read its size"
                + ("; the RM scores its evaluation pairs at least as well as its training "
                   "pairs, so no memorization shows on average" if edge == "largest" else "")
            )})  # fmt: skip
        exp.write_json(summary, "summary.json")
    say_summary(summary)
    return table


EVAL_GROUP = "(eval data)"  # the group of ``eval_data``: scored, never removed


def _with_eval(pairs: pd.DataFrame, eval_pairs: pd.DataFrame, ckpt, folder: Path) -> pd.DataFrame:
    """The audited pairs: the trained ones, then ``eval_data`` (the RM's held-out pairs,
    which ``ckpt`` now calibrates on); refuses, in one line, an RM with an evaluation split of
    its own, and pairs on both sides."""
    if ckpt.has_eval:
        raise InputError(f"`eval_data`: `rm` {folder} holds out an evaluation split of its "
                         "own, which the audit calibrates on; leave `eval_data` out")
    both = sorted(set(pairs.id) & set(eval_pairs.id))
    if both:
        raise InputError(f"`eval_data`: {len(both)} pair(s) are also in the pairs the RM was "
                         f"trained on (id {both[0]!r}); give pairs it never saw")
    ckpt.eval_words, ckpt.given_eval = "the evaluation pairs given (`eval_data`)", True
    audited = pd.concat([pairs, eval_pairs], ignore_index=True)
    audited.attrs = dict(pairs.attrs)
    return audited


class _RmlensRM:
    """An RM folder of ``rmlens train``: its training pairs checked by fingerprint, its
    evaluation split found again."""

    unchecked = False
    eval_words = "the RM's own evaluation split"
    given_eval = False  # evaluation pairs given apart (``_with_eval``)

    def __init__(self, folder: Path, pairs: pd.DataFrame):
        _, trained = trained_record(folder)
        self.pairs_note = same_pairs(folder, pairs, trained, "train.json")
        self.folder = folder
        self.train = TrainConfig.from_dict(trained["train_config"])
        self.trained = ("every weight" if self.train.finetune == "full"
                        else "its LoRA adapters and head")  # fmt: skip

    def load(self, device: str, precision: str):
        # lazy: torch, transformers load only when this runs
        from rmlens.hub import load_rm

        model = load_rm(self.folder, device=device, precision=precision)
        for name, param in model.net.named_parameters():  # what training moved
            param.requires_grad_(self.train.finetune == "full" or "lora_" in name
                                 or name.startswith("head."))  # fmt: skip
        model.backbone.format = model.format
        return model.net, model.backbone, model.runtime

    @property
    def has_eval(self) -> bool:
        """Whether its training held out an evaluation split (``eval_fraction`` > 0), for
        the words written before the split is drawn (``split``), or was given pairs apart."""
        return self.given_eval or bool(self.train.eval_fraction)

    def split(self, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return eval_split(usable, self.train.eval_fraction, self.train.seed)

    def as_read(self, examples: list) -> list:
        """Its own tokenization: as it trained."""
        return examples

    def check(self, pairs, rewards, kept) -> None:
        """Its own rewards: nothing to compare."""


def same_pairs(folder: Path, pairs: pd.DataFrame, trained: dict, name: str) -> str:
    """Refuse, in one line, pairs other than those the training record ``name`` of the RM at
    ``folder`` fingerprints; else the words of what was checked."""
    if data_sha1(pairs) != trained.get("data_sha1"):
        raise InputError(
            f"`data`: not the pairs `rm` {folder} was trained on ({len(pairs)} pairs, "
            f"fingerprint {data_sha1(pairs)[:12]}; its {name}: "
            f"{trained.get('n_train')} pairs, {str(trained.get('data_sha1'))[:12]}): pass "
            "its training file as it was"
        )
    return f"the pairs of its {name} (sha1 {trained['data_sha1'][:12]})"


class _ClassifierRM:
    """A Hugging Face classifier RM (whole, or a PEFT LoRA adapter), read as ``rmlens score``
    and transformers read it, its rewards checked against its own forward pass. Trained
    elsewhere: its training pairs are the user's word and every pair counts as trained on.
    An rmlens export carries its training record (``rmlens_training.json``: the pairs'
    fingerprint, checked, and the settings that find its evaluation split again) and, for a
    LoRA RM, its adapter unmerged, which the gradients go through."""

    eval_words = "the RM's own evaluation split"
    given_eval = False  # evaluation pairs given apart (``_with_eval``)

    def __init__(self, folder: Path, config: AuditConfig, pairs: pd.DataFrame):
        # lazy: the export's names (its module loads torch)
        from rmlens.hub import TRAINING_RECORD

        if not ((folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()):
            raise InputError(
                f"`rm` {folder}: neither an rmlens RM folder (rm_config.json) nor a Hugging "
                "Face model (config.json) or PEFT adapter (adapter_config.json)"
            )
        self.folder, self.config, self.record = folder, config, None
        if (folder / TRAINING_RECORD).is_file():
            self.record = json.loads((folder / TRAINING_RECORD).read_text())
            self.pairs_note = same_pairs(folder, pairs, self.record, TRAINING_RECORD)
            self.train = TrainConfig.from_dict(self.record["train_config"])
            self.trained = ("its LoRA adapters and head" if self.record.get("adapter")
                            else "every weight")  # fmt: skip
            return
        self.train = TrainConfig(model=str(folder), max_length=config.max_length,
                                 format=config.format, eval_fraction=0.0)  # fmt: skip
        self.trained = ("its LoRA adapters and score layer"
                        if (folder / "adapter_config.json").is_file() else "every weight")
        self.pairs_note = (
            "as given: an RM trained outside rmlens records no training pairs, so that "
            "--data holds exactly the pairs it was trained on is not checked; a pair it was "
            "not trained on gets a TM and TG that mean nothing"
        )

    @property
    def unchecked(self) -> bool:
        """Whether its training pairs are the user's word (no training record)."""
        return self.record is None

    @property
    def has_eval(self) -> bool:
        """Whether its training record holds out an evaluation split (without a record every
        pair counts as trained on), or it was given pairs apart."""
        return self.given_eval or (self.record is not None and bool(self.train.eval_fraction))

    def load(self, device: str, precision: str):
        # lazy: torch, transformers load only when this runs
        # private: a classifier checkpoint as the fine-tuned loop's net and runtime (rewards'
        # torch internals)
        from rmlens.hub._classifier_net import as_pooled, classifier_net
        from rmlens.rewards._tuned import runtime_for

        dev = resolve_device(device)
        own = self.record is None  # the user's format and length, else those it trained with
        net, backbone, self.trained, self.classifier = classifier_net(
            self.folder, format=self.config.format if own else self.record["format"],
            max_length=self.config.max_length if own else self.record["max_length"],
            device=dev, training=self.record,
        )  # fmt: skip
        self.backbone = backbone
        self.train = self.train.replace(format=backbone.format, max_length=backbone.max_length)
        self.pooled = partial(as_pooled,
                              pad_id=getattr(self.classifier.config, "pad_token_id", None))
        self.precision = precision
        return net, backbone, runtime_for(backbone, self.train, dev, precision)

    def split(self, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.has_eval:
            return eval_split(usable, self.train.eval_fraction, self.train.seed)
        return usable, usable[:0]

    def as_read(self, examples: list) -> list:
        """Each sequence up to the token the classifier pools (``as_pooled``, set by ``load``)."""
        return self.pooled(examples)

    def check(self, pairs, rewards, kept) -> None:
        # lazy: torch, transformers load only when this runs
        # private: the net checked against its classifier, rewards' torch internals
        from rmlens.hub import SequenceClassifierRM
        from rmlens.hub._classifier_net import check_agreement, reward_offset

        classifier = SequenceClassifierRM(self.classifier, self.backbone.tokenizer,
                                          max_length=self.backbone.max_length,
                                          format=self.backbone.format,
                                          offset=reward_offset(self.classifier.config))  # fmt: skip
        r_c, r_r = classifier.score_pairs(pairs[kept])
        check_agreement(self.folder, rewards[kept], np.stack([r_c, r_r], 1), self.precision)


def _config_of(config: AuditConfig, train: TrainConfig) -> AuditConfig:
    """The audit's settings: the user's grouping and outputs, the RM's training."""
    if config.dedupe != "none":
        raise InputError(
            f"`dedupe` {config.dedupe}: the RM was trained on every given pair; the "
            "one-checkpoint audit reads them as they are (`dedupe` none)"
        )
    return config.replace(
        mode="finetune", model=train.model, max_length=train.max_length,
        format=train.format, precision=config.precision, seed=train.seed,
        train=train.replace(precision=config.precision), estimator="paired", check_exact=None,
        runs=1, n_boot=0,  # one run: no run to resample
    )  # fmt: skip
