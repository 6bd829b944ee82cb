"""Frozen backbones side by side: held-out accuracy of `minilm` and `smollm2-135m` RMs.

For each dataset (the shared HH pairs grouped by prompt, the SQuALITY pairs grouped by
user_id: the groups an audit uses) and each backbone:

1. encode every unique text once (`featurize`, into a fresh cache unless --cache): the
   encoding time;
2. the frozen-head audit itself, one repeat of grouped K-fold (K = --folds, fewer when
   there are fewer groups; every pair is held out in exactly one run), with the project's
   default head and validation settings (`AuditConfig()`: linear head, early stopping on
   validation groups carved from each run's training groups): held-out accuracy
   (ties count 1/2) pooled over pairs, its spread over folds, in-train accuracy, and the
   head time per run;
3. a reference on the same folds: L2 logistic regression on the standardized feature
   difference h(chosen) - h(rejected) (both orders, no intercept), C chosen from
   1e-3..1 by grouped 3-fold CV inside the training folds.

Prints the numbers and, per dataset, ratios against `minilm` measured in this process.
Not a test.

    python benchmarks/backbones.py [--pairs N] [--models minilm,smollm2-135m]
                                   [--datasets hh,squality] [--cache DIR] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from rmlens.backbones import featurize, load_backbone
from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._runner import resolve_groups
from rmlens.rewards import FrozenHeadTrainer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATASETS = {
    "hh": "hh-rlhf-harmless-base-test.jsonl.gz",
    "squality": "squality-human-eval-pairs.jsonl",
}


def accuracy(diff: np.ndarray) -> float:
    """Pairwise accuracy of reward differences r+ - r-: ties count 1/2."""
    return float(np.mean((diff > 0) + 0.5 * (diff == 0))) if len(diff) else float("nan")


def subsample(pairs: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    if n is None or n >= len(pairs):
        return pairs
    # the first n of one seeded permutation: a larger --pairs contains a smaller one (and
    # reuses its cached features)
    rows = np.sort(np.random.default_rng(seed).permutation(len(pairs))[:n])
    return pairs.iloc[rows].reset_index(drop=True)


def head_audit(pairs, backbone, name: str, cache: Path, folds: int, out: Path) -> dict:
    """The audit's own frozen heads over one repeat of grouped K-fold; accuracies and times."""
    config = AuditConfig(model=name, runs=folds, folds=folds, n_boot=0)
    trainer = FrozenHeadTrainer(config.head, model=name, backbone=backbone, cache_dir=cache)
    fit_score, seconds = trainer.fit_score, []

    def timed_fit_score(*args, **kwargs):
        start = time.perf_counter()
        result = fit_score(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
        return result

    trainer.fit_score = timed_fit_score
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")  # the audit's warnings about few runs: one repeat here
        audit(pairs, config, out=out, trainer=trainer, quiet=True)
    plan = pd.read_parquet(out / "plan.parquet")
    runs = int(json.loads((out / "config.json").read_text())["folds_used"])
    pair_groups, _, _ = resolve_groups(pairs, None)
    pair_groups = pair_groups.to_numpy()
    held_out, in_train, test_diff = [], [], np.full(len(pairs), np.nan)
    for run in range(runs):
        rows = plan[plan.run == run]
        val = rows.validation if "validation" in rows else pd.Series(False, index=rows.index)
        train_groups = set(rows.group[rows.in_train])
        out_groups = set(rows.group[~rows.in_train & ~val])
        scores = pd.read_parquet(out / "runs" / f"{run:03d}" / "scores.parquet")
        diff = (scores.r_chosen - scores.r_rejected).to_numpy()
        is_out = np.isin(pair_groups, list(out_groups))
        test_diff[is_out] = diff[is_out]
        held_out.append(accuracy(diff[is_out]))
        in_train.append(accuracy(diff[np.isin(pair_groups, list(train_groups))]))
    scored = np.isfinite(test_diff)
    return {
        "folds": runs,
        "head_acc": accuracy(test_diff[scored]),
        "head_acc_fold_std": float(np.std(held_out, ddof=1)) if runs > 1 else float("nan"),
        "head_train_acc": float(np.mean(in_train)),
        "head_s_per_run": float(np.mean(seconds)),
        "n_scored": int(scored.sum()),
    }


def logistic_reference(features, pairs: pd.DataFrame, out: Path) -> float:
    """Held-out accuracy of logistic regression on h+ - h-, on the audit's folds."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GroupKFold

    plan = pd.read_parquet(out / "plan.parquet")
    runs = int(json.loads((out / "config.json").read_text())["folds_used"])
    groups, _, _ = resolve_groups(pairs, None)
    groups = groups.to_numpy()
    x = features.chosen - features.rejected  # (n_pairs, d)
    diff = np.full(len(pairs), np.nan)
    for run in range(runs):
        rows = plan[plan.run == run]
        val = rows.validation if "validation" in rows else pd.Series(False, index=rows.index)
        test = np.isin(groups, list(rows.group[~rows.in_train & ~val]))
        train = ~test & features.kept  # the validation groups train here: no early stopping
        # scaled, not centered: the mean difference is the signal (the symmetric set's mean
        # is 0, its std the root mean square)
        z = x / (np.sqrt((x[train] ** 2).mean(0)) + 1e-6)
        xs = np.concatenate([z[train], -z[train]])  # both orders: a symmetric classifier
        ys = np.r_[np.ones(train.sum()), np.zeros(train.sum())]
        gs = np.concatenate([groups[train], groups[train]])
        inner = list(GroupKFold(n_splits=min(3, len(set(gs)))).split(xs, ys, gs))
        model = LogisticRegressionCV(Cs=[1e-3, 1e-2, 1e-1, 1.0], cv=inner, fit_intercept=False,
                                     max_iter=2000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(xs, ys)
        diff[test] = z[test] @ model.coef_[0]
    return accuracy(diff[np.isfinite(diff)])


def run_one(name: str, model: str, pairs: pd.DataFrame, args, tmp: Path) -> dict:
    start = time.perf_counter()
    backbone = load_backbone(model)
    load_s = time.perf_counter() - start
    cache = args.cache or tmp / "cache"
    start = time.perf_counter()
    features = featurize(backbone, pairs, cache_dir=cache, batch_size=args.batch_size,
                         quiet=True)
    encode_s = time.perf_counter() - start
    row = {"data": name, "model": model, "pairs": len(pairs), "dim": backbone.hidden_size,
           "max_len": backbone.max_length, "load_s": load_s, "encode_s": encode_s,
           "texts_encoded": features.n_encoded, "dropped": int((~features.kept).sum())}
    out = tmp / f"{name}-{model}"
    row.update(head_audit(pairs, backbone, model, cache, args.folds, out))
    row["logreg_acc"] = logistic_reference(features, pairs, out)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=None,
                        help="Random subsample of N pairs per dataset (seeded); default all.")
    parser.add_argument("--models", default="minilm,smollm2-135m")
    parser.add_argument("--datasets", default="hh,squality")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16, help="Texts per encoding batch.")
    parser.add_argument("--cache", type=Path, default=None,
                        help="Embedding cache to reuse (default: a fresh one, so encoding "
                             "is timed).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows here.")
    parser.add_argument("--data-dir", type=Path, default=SHARED,
                        help="Folder of the shared pairs (default ../shared/data).")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [d for d in args.datasets.split(",") if d not in DATASETS]
    if unknown:
        parser.error(f"--datasets: unknown {', '.join(unknown)} (from {', '.join(DATASETS)})")
    audit_defaults = AuditConfig()
    head = audit_defaults.head
    print(f"torch threads: {torch.get_num_threads()}; head: AuditConfig() defaults ({head.head}, "
          f"lr {head.lr}, weight decay {head.weight_decay}, at most {head.epochs} epochs, "
          f"patience {head.patience} on validation groups, val_fraction "
          f"{getattr(audit_defaults, 'val_fraction', 0)}); cache: "
          f"{str(args.cache) if args.cache else 'fresh'}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            path = args.data_dir / DATASETS[name]
            if not path.exists():
                print(f"skip {name}: {path} not found (the shared data sit beside the checkout)")
                continue
            pairs = subsample(load_pairs(path), args.pairs, args.seed)
            groups, _, note = resolve_groups(pairs, None)
            print(f"\n{name}: {len(pairs)} pairs, {groups.nunique()} groups ({note})")
            for model in models:
                try:
                    row = run_one(name, model, pairs, args, Path(tmp))
                except Exception as err:  # noqa: BLE001 - a missing preset skips one row
                    print(f"  skip {model}: {type(err).__name__}: {err}")
                    continue
                rows.append(row)
                print(f"  {model:14s} held-out acc head {row['head_acc']:.3f} "
                      f"(+- {row['head_acc_fold_std']:.3f} over {row['folds']} folds; "
                      f"in-train {row['head_train_acc']:.3f}), logreg {row['logreg_acc']:.3f}; "
                      f"encode {row['encode_s']:.1f} s ({row['texts_encoded']} texts), "
                      f"load {row['load_s']:.1f} s, head {row['head_s_per_run']:.2f} s/run")
            base = next((r for r in rows if r["data"] == name and r["model"] == models[0]), None)
            for r in rows:
                if base is None or r["data"] != name or r is base:
                    continue
                per_text = [x["encode_s"] / x["texts_encoded"] if x["texts_encoded"] else None
                            for x in (r, base)]
                encode = (f"x{per_text[0] / per_text[1]:.1f} per text" if all(per_text)
                          else "n/a (cached)")
                print(f"  {r['model']} vs {base['model']}: encode {encode}, head time x"
                      f"{r['head_s_per_run'] / max(base['head_s_per_run'], 1e-9):.1f}, "
                      f"held-out acc {r['head_acc'] - base['head_acc']:+.3f} (head), "
                      f"{r['logreg_acc'] - base['logreg_acc']:+.3f} (logreg)")
    if rows:
        print("\n" + pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
