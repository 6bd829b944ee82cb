"""Fine-tuned paired CM against brute force: Gauss-Newton influence through the LoRA and
head parameters, beside last-layer influence (issue 40).

Settings (each a LoRA RM per run, the audit's fine-tuning with one learning rate):

- ``minilm-hh``: MiniLM on the 300 shortest shared HH pairs (128 tokens), grouped by prompt;
- ``minilm-hh-1000``: the same on the 1,000 shortest, sized for a 95% interval of about
  +-0.05 on the share of the ceiling (issue 48);
- ``minilm-synth``: MiniLM on 300 synthetic pairs of 30 users (planted mechanisms);
- ``smollm2-hh``: SmolLM2-135M-Instruct on the 120 shortest shared HH pairs (128 tokens).

For each: a disjoint brute-force reference (plan seed 1, ``--reference-runs``, rounded up to
whole repeats of the plan; 25 for SmolLM2) that grows over invocations and survives restarts:
each finished run is committed under ``benchmarks/references/<setting>/``
(``helpers/reference_store.py``), restored into the work folder's audit before it grows, and read
from there by the report on any machine; and a 5-run paired
audit of plan seed 0 read two ways: ``gauss-newton`` (per-pair gradients of the LoRA
adapters and the head, a Woodbury solve in pair space), and ``last-layer`` (the head alone,
from each run's saved RM: the same trainings, not trained again). Each reading calibrates
its damping on its own 5 runs. Where ``benchmarks/influence_blocks.py`` has read the
same runs through the last K blocks' adapters, those readings are set against the reference
too. Printed per setting and method: CM's split-half
reliability (each run a unit), Spearman with the reference's CM, the ceiling
sqrt(rel * rel_ref), the share of it with its 95% bootstrap interval over pairs (the
Spearman and both reliabilities recomputed on each resample), mean CM; the cost of a
paired run against a brute-force run (median seconds between runs' manifests, and the
influence pass each run records); then the one-checkpoint audit (``rmlens memorize
--rm``) of an RM trained once on every pair, against the paired audit and the reference.

``--phase reference`` grows the references only, one repeat of the plan at a time,
committing the runs after each (an interrupted growth loses at most the runs of its repeat
not yet finished; run it again to go on); ``--phase paired`` reads them as they stand (their
committed runs); ``--phase cost`` times one run of each kind in turn in this process (brute
force, and paired with each method).

    python benchmarks/finetune_paired.py [--settings minilm-hh minilm-synth smollm2-hh]
        [--reference-runs 40] [--smollm2-reference-runs 25] [--phase all|reference|paired|cost]
        [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from helpers.cm import cm_from, reliability_at
from helpers.pairs import HH, shortest
from helpers.reference_store import committed_runs, grow, load_reference, read_info, seconds_per_run

from rmlens.data import load_pairs, synthesize
from rmlens.data._synth_config import SynthConfig
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._run_folders import RunMatrices, load_matrices
from rmlens.rewards import TrainConfig
from rmlens.stats import spearman

LORA = TrainConfig(epochs=4, patience=1, lr=3e-4, lr_grid=(), head_lr=2e-3)
PAIRED_RUNS = 5
SETTINGS = {
    "minilm-hh": dict(model="minilm", pairs=300, data="hh"),
    "minilm-hh-1000": dict(model="minilm", pairs=1000, data="hh"),
    "minilm-synth": dict(model="minilm", pairs=300, data="synth"),
    "smollm2-hh": dict(model="smollm2-135m", pairs=120, data="hh"),
}
METHODS = ("gauss-newton", "last-layer")
REFERENCES = Path(__file__).resolve().parent / "references"


@dataclass
class Reference:
    """A brute-force reference's finished runs, its plan's folds, the median seconds of a run,
    and where it was read."""

    m: RunMatrices
    folds: int
    seconds: float
    where: str


def reference_of(name: str, work_ref: Path) -> Reference | None:
    """The committed reference (``benchmarks/references/<name>``) when it has runs, else the
    work folder's audit when it has finished runs, else None."""
    store = REFERENCES / name
    if committed_runs(store):
        return Reference(load_reference(store), read_info(store)["folds"],
                         seconds_per_run(store), f"committed, {store}")  # fmt: skip
    if list(work_ref.glob("runs/*/manifest.json")):
        folds = json.loads((work_ref / "config.json").read_text())["folds_used"]
        return Reference(load_matrices(work_ref), folds, per_run(work_ref), str(work_ref))
    return None


def pairs_of(setting: dict):
    if setting["data"] == "synth":
        return synthesize(SynthConfig(n_pairs=setting["pairs"], n_users=30, seed=0))
    if not HH.exists():
        return None
    return shortest(load_pairs(HH), setting["model"], setting["pairs"], 128)


def config_of(setting: dict) -> AuditConfig:
    """bf16 on every machine, so a committed reference grows the same anywhere (issue 57
    shows fine-tuning keeps its numbers in bf16)."""
    return AuditConfig(model=setting["model"], max_length=128, mode="finetune", train=LORA,
                       n_boot=0, precision="bf16")  # fmt: skip


def per_run(out: Path) -> float:
    """Median seconds between consecutive runs' manifests (so resumed audits time too)."""
    stamps = sorted(p.stat().st_mtime for p in out.glob("runs/*/manifest.json"))
    return float(np.median(np.diff(stamps))) if len(stamps) > 2 else float("nan")


def influence_seconds(out: Path) -> float:
    """Median seconds of the runs' influence pass (what a paired run adds)."""
    seconds = []
    for path in out.glob("runs/*/manifest.json"):
        value = json.loads(path.read_text())["metrics"].get("influence_seconds")
        if value is not None:
            seconds.append(value)
    return float(np.median(seconds)) if seconds else float("nan")


def brute_of(m: RunMatrices) -> RunMatrices:
    return RunMatrices(m.ids, m.runs, m.p, m.member, m.val)


def interval(a: np.ndarray, b: np.ndarray, ref: np.ndarray, draws: int = 1000) -> str:
    """95% bootstrap interval over pairs of Spearman(a, ref), and of Spearman(a, ref) -
    Spearman(b, ref) when ``b`` is given (the same resampled pairs for both)."""
    ok = np.isfinite(a) & np.isfinite(ref) & (np.isfinite(b) if b is not None else True)
    a, ref = a[ok], ref[ok]
    b = None if b is None else b[ok]
    rng = np.random.default_rng(0)
    rho, diff = [], []
    for _ in range(draws):
        i = rng.integers(0, len(a), len(a))
        rho.append(spearman(a[i], ref[i]))
        if b is not None:
            diff.append(rho[-1] - spearman(b[i], ref[i]))
    text = "[{:.2f}, {:.2f}]".format(*np.quantile(rho, [0.025, 0.975]))
    if b is not None:
        text += "; minus the next method's: [{:.3f}, {:.3f}]".format(
            *np.quantile(diff, [0.025, 0.975]))  # fmt: skip
    return text


def rows_of(m: RunMatrices, rows: np.ndarray) -> RunMatrices:
    p_cf = None if m.p_cf is None else m.p_cf[rows]
    return RunMatrices(m.ids[rows], m.runs, m.p[rows], m.member[rows], m.val[rows], p_cf)


def share(m: RunMatrices, ref: RunMatrices, folds: int) -> float:
    """rho / sqrt(rel rel_ref): ``m``'s CM against the reference's (rows of the same pairs),
    over the ceiling that the two audits' own reliabilities allow."""
    rho = spearman(cm_from(m, np.arange(len(m.runs))), cm_from(ref, np.arange(len(ref.runs))))
    rel = reliability_at(m, len(m.runs), folds)
    rel_ref = reliability_at(ref, len(ref.runs) // folds * folds, folds)
    return rho / np.sqrt(rel * rel_ref) if rel > 0 and rel_ref > 0 else np.nan


def share_interval(m: RunMatrices, ref: RunMatrices, folds: int, draws: int = 400) -> str:
    """95% bootstrap interval over pairs of the share of the ceiling, the Spearman and both
    reliabilities recomputed on each resample of pairs (the same pairs in both audits)."""
    rows = m.ids.get_indexer(ref.ids)
    ok = rows >= 0
    m, ref = rows_of(m, rows[ok]), rows_of(ref, np.flatnonzero(ok))
    rng = np.random.default_rng(0)
    draws_ = [share(rows_of(m, i), rows_of(ref, i), folds)
              for i in (rng.integers(0, len(m.ids), len(m.ids)) for _ in range(draws))]
    lo, hi = np.nanquantile(draws_, [0.025, 0.975])
    return f"[{lo:.2f}, {hi:.2f}] (+-{(hi - lo) / 2:.3f})"


def report(name: str, paired: dict[str, Path], reference: Reference | None) -> None:
    if reference is None:
        print(f"\n## {name}: no brute-force reference yet (--phase reference grows it)")
        for method, out in paired.items():
            m = load_matrices(out)
            rel = reliability_at(m, len(m.runs), 5)
            print(f"{method}: {len(m.runs)} runs, CM reliability {rel:.3f}, mean CM "
                  f"{np.nanmean(cm_from(m, np.arange(len(m.runs)))):.4f}")  # fmt: skip
        return
    ref, folds = reference.m, reference.folds  # its finished runs (still growing counts too)
    ref_cm = cm_from(ref, np.arange(len(ref.runs)))
    whole = len(ref.runs) // folds * folds
    rel_ref = reliability_at(ref, whole, folds)
    print(f"\n## {name}: brute-force reference, {len(ref.runs)} runs (plan seed 1; "
          f"{reference.where}): CM Spearman-Brown {rel_ref:.3f}, mean CM "
          f"{np.nanmean(ref_cm):.4f}")  # fmt: skip
    print("method | runs | rel | rho_ref | ceiling | of ceiling | mean CM | damping")
    rows = []
    for method, out in paired.items():
        m = load_matrices(out)
        runs = len(m.runs)
        damping = json.loads((out / "summary.json").read_text()).get("damping") or {}
        rows.append((method, m, runs, f"{damping.get('damping', float('nan')):.3g}"))
    if rows:
        rows.append(("brute, same runs", brute_of(rows[0][1]), rows[0][2], "-"))
    cms = [pd.Series(cm_from(m, np.arange(runs)), index=m.ids).reindex(ref.ids).to_numpy()
           for _, m, runs, _ in rows]  # fmt: skip
    spreads = [
        f"{method}: Spearman with the reference, 95% bootstrap over pairs "
        f"{interval(cms[k], cms[k + 1] if k + 1 < len(rows) else None, ref_cm)}"
        for k, (method, _, _, _) in enumerate(rows)
    ]
    for method, m, runs, damping in rows:
        cm = cm_from(m, np.arange(runs))
        rel = reliability_at(m, runs, folds)
        rho = spearman(cm, ref_cm)
        ceiling = float(np.sqrt(max(rel, 0) * max(rel_ref, 0))) if np.isfinite(rel) else np.nan
        share = rho / ceiling if ceiling > 0 else np.nan
        print(f"{method} | {runs} | {rel:.3f} | {rho:.3f} | {ceiling:.3f} | {share:.2f} | "
              f"{np.nanmean(cm):.4f} | {damping}")  # fmt: skip
    print("\n".join(spreads))
    for method, m, _, _ in rows[:-1]:
        print(f"{method}: share of the ceiling, 95% bootstrap over pairs (rho and both "
              f"reliabilities recomputed) {share_interval(m, ref, folds)}")
    scored = np.isfinite(ref.p) & ~ref.val
    inside, outside = ref.member & scored, ~ref.member & scored
    print(f"reference RMs: in-train accuracy {np.mean(ref.p[inside] > 0.5):.3f}, held-out "
          f"{np.mean(ref.p[outside] > 0.5):.3f} (pairs x runs)")  # fmt: skip
    brute_s = reference.seconds
    for method, out in paired.items():
        extra = influence_seconds(out)
        if method != "gauss-newton":  # read again from the saved runs: no run time of its own
            print(f"cost, {method}: its influence pass {extra:.1f} s (median)")
            continue
        paired_s = per_run(out)
        print(f"cost, {method}: {paired_s:.1f} s per paired run against {brute_s:.1f} s per "
              f"brute-force run ({paired_s / brute_s:.2f}x); its influence pass {extra:.1f} s "
              f"(+{extra / brute_s:.2f} of a brute-force run)")  # fmt: skip


def first_run(pairs, config: AuditConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs' groups, and the training and validation pairs of the plan's run 0 (seed
    0): what a timed run trains on."""
    from rmlens.memorization._directory import group_pairs
    from rmlens.memorization._plans import carve_validation, make_plan

    groups = group_pairs(pairs, config).groups
    plan = carve_validation(make_plan(groups, n_runs=5, n_folds=5, seed=0), 0.2, seed=0)
    run = plan[plan.run == 0].set_index("group")
    label = groups.astype(str).to_numpy()
    train = np.flatnonzero(run.in_train.reindex(label).to_numpy(bool))
    val = np.flatnonzero(run.validation.reindex(label).to_numpy(bool))
    return groups, train, val


def cost(name: str, setting: dict, pairs, repeats: int = 2) -> None:
    """Seconds of one run trained and scored as brute force does, and as a paired run does
    (the same training plus the influence pass), interleaved in this process on the same
    pairs and seed (the plan's run 0 of seed 0)."""
    from rmlens.rewards import make_trainer

    config = config_of(setting)
    groups, train, val = first_run(pairs, config)
    seconds = {}
    for method in ("brute", *METHODS):
        trainer = make_trainer(config.resolved().train.replace(
            influence="gauss-newton" if method == "brute" else method))
        trainer.prepare(pairs, quiet=True, groups=None if method == "brute" else groups)
        seconds[method] = (trainer, [])
    for _ in range(repeats):
        for method, (trainer, times) in seconds.items():
            start = time.perf_counter()
            out = trainer.fit_score(train, seed=7, val_index=val)
            times.append(time.perf_counter() - start)
            if method != "brute":
                times[-1] = (times[-1], out.metrics["influence_seconds"])
    brute = min(seconds["brute"][1])
    for method in METHODS:
        best = min(seconds[method][1])
        print(f"cost, {name}, {method}: a paired run {best[0]:.1f} s against a brute-force run "
              f"{brute:.1f} s ({best[0] / brute:.2f}x; influence pass {best[1]:.1f} s), best of "
              f"{repeats}, interleaved in one process")  # fmt: skip


def last_layer_of(gn_dir: Path, out: Path, pairs) -> Path:
    """The Gauss-Newton audit's own runs read by last-layer influence (``reread``)."""
    return reread(gn_dir, out, pairs, influence="last-layer")


def reread(gn_dir: Path, out: Path, pairs, **changes) -> Path:
    """The Gauss-Newton audit's own runs read another way (``changes`` to their training
    config: ``influence="last-layer"``, ``influence_blocks=K``): each run's saved RM scores
    the pairs again and writes its grid of counterfactuals into a copy of the audit, which
    then finishes (calibration included) as any audit does. The same trainings read two
    ways, at no second training."""
    from rmlens._io import write_parquet
    from rmlens.experiment import AuditDir
    from rmlens.hub import load_rm
    from rmlens.memorization._directory import group_pairs
    from rmlens.memorization._finish import finish
    from rmlens.rewards import influence_scores
    from rmlens.rewards._packing import examples_of
    from rmlens.rewards._trainer_base import group_codes

    if (out / "summary.json").exists():
        return out
    shutil.copytree(gn_dir, out, dirs_exist_ok=True)
    record = json.loads((out / "config.json").read_text())
    record["audit"]["train"].update(changes)
    (out / "config.json").write_text(json.dumps(record, indent=1))
    config = AuditConfig.from_dict(record["audit"])
    groups = group_pairs(pairs, config).groups
    ids = pairs.id.astype(str).to_numpy()
    margin = pairs["margin"].to_numpy(float) if "margin" in pairs else None
    gap = 0.0
    for run in sorted((out / "runs").iterdir()):
        manifest = json.loads((run / "manifest.json").read_text())
        model = load_rm(run / "rm", device="cpu")
        model.backbone.format = model.format
        cfg = model.config.replace(**changes)
        if cfg.influence == "gauss-newton":  # what the run trained, as it trained it
            for param_name, param in model.net.named_parameters():
                param.requires_grad_("lora_" in param_name or param_name.startswith("head."))
        examples, kept = examples_of(pairs, model.backbone, cfg, implicit=False)
        fit = np.flatnonzero(np.isin(ids, manifest["train_ids"]))
        val = np.flatnonzero(np.isin(ids, manifest["val_ids"]))
        start = time.perf_counter()
        r, (p, p_cf, lambdas) = influence_scores(model.net, examples, kept, model.runtime, cfg,
                                                 group_codes(groups), fit, val, margin=margin)
        saved = pd.read_parquet(run / "scores.parquet").set_index("id")
        gap = max(gap, float(np.nanmax(np.abs(saved.r_chosen.to_numpy()
                                              - r[kept, 0]))))  # fmt: skip
        scores = pd.DataFrame({"id": pairs.id.to_numpy(), "r_chosen": r[:, 0],
                               "r_rejected": r[:, 1], "p": p, "p_cf_grid": list(p_cf)})[kept]
        write_parquet(scores, run / "scores.parquet")
        manifest["metrics"].update(damping_l2=lambdas.tolist(),
                                   influence_seconds=time.perf_counter() - start)
        (run / "manifest.json").write_text(json.dumps(manifest))
    print(f"{changes} from the saved runs' RMs: rewards within {gap:.2g} of the runs' own")
    finish(pairs, groups, config, AuditDir(out), quiet=True)
    return out


def checkpoint_rm(setting: dict, pairs, rm: Path) -> Path:
    """The RM the one-checkpoint audit reads: trained once on every pair (its own
    evaluation split aside), with the audit's LoRA settings; kept where it was trained."""
    from rmlens.hub import train

    if not (rm / "rm_config.json").exists():
        train(pairs, LORA.replace(model=setting["model"], max_length=128, device="cpu",
                                  eval_fraction=0.2),
              out=rm, quiet=True)  # fmt: skip
    return rm


def checkpoint(name: str, setting: dict, pairs, work: Path, reference: Reference | None) -> None:
    """The one-checkpoint audit of an RM trained once on every pair, set against the 5-run
    paired audit (Gauss-Newton) and the brute-force reference."""
    from rmlens.memorization import audit_rm

    rm = checkpoint_rm(setting, pairs, work / f"{name}-checkpoint-rm")
    out = work / f"{name}-checkpoint"
    table = audit_rm(pairs, rm, out=out, quiet=True).set_index("id")
    paired = pd.read_parquet(work / f"{name}-paired-gauss-newton" / "memorization.parquet")
    paired = paired.set_index("id").loc[table.index]
    against_ref = ""
    if reference is not None:
        ref = reference.m
        ref_cm = pd.Series(cm_from(ref, np.arange(len(ref.runs))), index=ref.ids)
        against_ref = f", with the reference {spearman(table.cm, ref_cm.loc[table.index]):.3f}"
    seconds = json.loads((out / "runs" / "000" / "manifest.json").read_text())["metrics"]
    print(f"one checkpoint ({len(table)} pairs, one training of all of them): CM Spearman "
          f"with the 5-run paired audit {spearman(table.cm, paired.cm):.3f} (TM "
          f"{spearman(table.tm, paired.tm):.3f}, TG {spearman(table.tg, paired.tg):.3f})"
          f"{against_ref}; mean CM {table.cm.mean():.4f} (the paired audit's "
          f"{paired.cm.mean():.4f}); influence pass {seconds['influence_seconds']:.1f} s")


def bench(name: str, reference_runs: int, phase: str, work: Path) -> None:
    setting = SETTINGS[name]
    pairs = pairs_of(setting)
    if pairs is None:
        print(f"{name}: skipped, {HH} not found")
        return
    if phase == "cost":
        cost(name, setting, pairs)
        return
    config = config_of(setting)
    ref = work / f"{name}-ref"
    if phase != "paired":
        store = REFERENCES / name
        print(f"{name}: {len(pairs)} pairs; growing the reference to {reference_runs} runs "
              f"({len(committed_runs(store))} committed in {store})", flush=True)  # fmt: skip
        new = grow(pairs, config.replace(seed=1, estimator="brute"), reference_runs, work=ref,
                   ref_dir=store, setting=name)  # fmt: skip
        print(f"{name}: {len(new)} runs committed, {len(committed_runs(store))} in all")
    if phase == "reference":
        return
    gn = work / f"{name}-paired-gauss-newton"
    audit(pairs, config.replace(runs=PAIRED_RUNS, seed=0, estimator="paired"), out=gn,
          quiet=True)  # fmt: skip
    paired = {"gauss-newton": gn,
              "last-layer": last_layer_of(gn, work / f"{name}-paired-last-layer", pairs)}
    readings = {int(out.name.rpartition("-")[2]): out  # benchmarks/influence_blocks.py's
                for out in work.glob(f"{name}-paired-gn-last-*")}  # fmt: skip
    for k in sorted(readings, reverse=True):
        if k and (readings[k] / "summary.json").exists():
            paired[f"gauss-newton, last {k} blocks"] = readings[k]
    reference = reference_of(name, ref)
    report(f"{name} ({len(pairs)} pairs)", paired, reference)
    checkpoint(name, setting, pairs, work, reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS),
                        default=["minilm-hh", "minilm-synth", "smollm2-hh"])  # fmt: skip
    parser.add_argument("--reference-runs", type=int, default=40,
                        help="Runs the brute-force references grow to (whole repeats of the "
                        "plan), committed under benchmarks/references/<setting>/.")  # fmt: skip
    parser.add_argument("--smollm2-reference-runs", type=int, default=25)
    parser.add_argument("--phase", choices=("all", "reference", "paired", "cost"),
                        default="all")  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path("finetune-paired-work"),
                        help="Where the audits live (resumed on the next invocation).")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    for name in args.settings:
        runs = args.smollm2_reference_runs if name.startswith("smollm2") else args.reference_runs
        bench(name, runs, args.phase, args.work)


if __name__ == "__main__":
    main()
