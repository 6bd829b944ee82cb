"""`rmlens mitigate` with 4 objectives against 4 separate `rmlens memorize` runs, cold cache.

mitigate loads the backbone once and encodes the pairs once (the embedding cache serves the
later audits); four separate memorize commands on fresh machines each load and encode. Both
sides run the same audits (same plan, seed, runs); the comparison step of mitigate (no
probes, no SHAP here, so only what both sides share is timed) is included in its time. Each
side starts with an empty embedding cache. Prints wall times and their ratio, measured in
this process. Not part of the tests.

    python benchmarks/mitigate.py [--data FILE] [--pairs 800] [--runs 10]
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf-harmless-base-test.jsonl.gz"
OBJECTIVES = ("bt", "label_smoothing", "poe", "reweight")


def rmlens(args: list[str], cache: Path) -> float:
    """Wall time of one `rmlens` command (a fresh process, as a user runs it)."""
    env = {**os.environ, "RMLENS_CACHE": str(cache)}
    start = time.perf_counter()
    command = Path(sys.executable).parent / "rmlens"  # the console script of this environment
    subprocess.run([str(command), *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--pairs", type=int, default=800, help="first N pairs (0: all)")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    if not args.data.exists():
        raise SystemExit(f"{args.data} not found (the shared HH pairs)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        opener = gzip.open if args.data.suffix == ".gz" else open
        with opener(args.data, "rt", encoding="utf-8") as f:
            lines = f.readlines()
        lines = lines[: args.pairs] if args.pairs else lines
        data = tmp / "pairs.jsonl"  # the first N records, in the file's own layout
        data.write_text("".join(lines), encoding="utf-8")
        common = ["--data", str(data), "--runs", str(args.runs), "--quiet"]
        separate = 0.0
        for name in OBJECTIVES:
            separate += rmlens(
                ["memorize", *common, "--out", str(tmp / f"sep_{name}"), "--objective", name,
                 "--no-report"],
                tmp / f"cache_{name}",  # a fresh machine per command: a cold cache each
            )  # fmt: skip
        together = rmlens(
            ["mitigate", *common, "--out", str(tmp / "mit"), "--objectives",
             ",".join(OBJECTIVES), "--no-probes", "--no-shap"],
            tmp / "cache_mitigate",
        )  # fmt: skip
    print(f"{len(lines)} pairs, {args.runs} runs, objectives {', '.join(OBJECTIVES)}")
    print(f"4 x rmlens memorize (cold cache each): {separate:8.1f} s")
    print(f"rmlens mitigate (one cold cache):      {together:8.1f} s")
    print(f"ratio: {separate / together:.2f}x")


if __name__ == "__main__":
    main()
