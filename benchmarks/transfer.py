"""How far a frozen audit speaks for a fine-tuned RM (issue 40): one set of pairs, one plan,
three modes.

On the shortest ``--pairs`` shared HH pairs (128 tokens), grouped by prompt, plan seed 0:

- frozen MiniLM and frozen SmolLM2-135M: the convex head, paired (exact Newton steps);
- LoRA SmolLM2-135M: the 5-run paired audit of ``finetune_paired.py`` (``smollm2-hh``,
  Gauss-Newton influence), read from ``--work``.

The frozen audits run as many runs as the LoRA one has. Printed (and written as an RST
table with ``--rst``): each mode's held-out accuracy and CM reliability (split-half,
Spearman-Brown; each run a unit), then for each pair of modes the Spearman correlation of
TM, TG and CM across pairs, raw and corrected for both sides' reliability
(rho / sqrt(rel_a rel_b), Spearman's correction for attenuation).

    python benchmarks/transfer.py [--pairs 120] [--work finetune-paired-work] [--rst FILE]
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from helpers.pairs import HH, shortest

from rmlens.data import load_pairs
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._reliability import split_half
from rmlens.memorization._run_folders import load_matrices
from rmlens.stats import spearman

LORA = "smollm2-hh-paired-gauss-newton"


def reliabilities(out: Path) -> dict[str, float]:
    """TM, TG and CM split-half reliabilities (Spearman-Brown), each run a unit."""
    m = load_matrices(out)
    runs = np.arange(len(m.runs))
    rel = split_half(m.p, m.member, m.val, runs, folds=1, p_cf=m.p_cf)
    return {k: rel[k]["spearman_brown"] for k in ("tm", "tg", "cm")}


def mode_row(name: str, out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    table = pd.read_parquet(out / "memorization.parquet").set_index("id")
    return {"mode": name, "table": table, "rel": reliabilities(out),
            "held_out": summary["rm_quality"]["held_out"]["accuracy"]["mean"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=120)
    parser.add_argument("--work", type=Path, default=Path("finetune-paired-work"))
    parser.add_argument("--rst", type=Path, help="Also write the tables as RST here.")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    lora = args.work / LORA
    if not HH.exists() or not (lora / "summary.json").exists():
        print(f"skipped: needs {HH} and {lora} (python benchmarks/finetune_paired.py "
              "--settings smollm2-hh --phase paired)")  # fmt: skip
        return
    pairs = shortest(load_pairs(HH), "smollm2-135m", args.pairs, 128)
    runs = len(load_matrices(lora).runs)
    modes = []
    for model in ("minilm", "smollm2-135m"):
        out = args.work / f"transfer-frozen-{model}"
        audit(pairs, AuditConfig(model=model, max_length=128, runs=runs, seed=0, n_boot=0,
                                 estimator="paired"), out=out, quiet=True)  # fmt: skip
        modes.append(mode_row(f"frozen {model}", out))
    modes.append(mode_row("LoRA smollm2-135m", lora))
    lines = ["mode | held-out accuracy | reliability TM | TG | CM"]
    for m in modes:
        r = m["rel"]
        lines.append(f"{m['mode']} | {m['held_out']:.3f} | {r['tm']:.3f} | {r['tg']:.3f} | "
                     f"{r['cm']:.3f}")  # fmt: skip
    lines.append("")
    lines.append("modes | TM raw (corrected) | TG raw (corrected) | CM raw (corrected)")
    for i in range(len(modes)):
        for j in range(i + 1, len(modes)):
            a, b = modes[i], modes[j]
            ids = a["table"].index.intersection(b["table"].index)
            cells = []
            for score in ("tm", "tg", "cm"):
                rho = spearman(a["table"].loc[ids, score], b["table"].loc[ids, score])
                ceiling = np.sqrt(max(a["rel"][score], 0) * max(b["rel"][score], 0))
                cells.append(f"{rho:.3f} ({rho / ceiling:.2f})" if ceiling > 0 else f"{rho:.3f}")
            lines.append(f"{a['mode']} vs {b['mode']} | " + " | ".join(cells))
    print(f"{len(pairs)} shortest shared HH pairs, {runs} paired runs per mode, plan seed 0")
    print("\n".join(lines))
    if args.rst:
        args.rst.write_text(_rst(lines))


def _rst(lines: list[str]) -> str:
    """The two tables as RST list-tables."""
    blocks, block = [], []
    for line in lines + [""]:
        if line:
            block.append([c.strip() for c in line.split("|")])
        elif block:
            blocks.append(block)
            block = []
    text = []
    for rows in blocks:
        text.append(".. list-table::\n   :header-rows: 1\n")
        for row in rows:
            text.append("   * - " + "\n     - ".join(row))
        text.append("")
    return "\n".join(text)


if __name__ == "__main__":
    main()
