"""Bit-identity of rmlens's outputs across a refactor: run the pipelines, fingerprint every file.

``run`` executes the command line on the demo (synthetic, built in), and, when they are given,
on HH-style and SQuALITY-style pair files: ``memorize``, ``attribute``, ``evaluate`` and
``report`` on each, ``mitigate`` (bt and poe, so ``compare`` and its page) on the smaller
file, and the fine-tuned trainer on its first 48 pairs (``train`` a LoRA MiniLM RM, and a
2-run ``memorize --mode finetune`` with Gauss-Newton paired counterfactuals: the adapters,
head and scores are compared bit for bit). ``--only finetune`` runs that last part alone.
Then it writes ``manifest.json``: one fingerprint per output file.

- Tables (``.parquet``): columns, dtypes and values (``pandas.util.hash_pandas_object``), so
  the writer's metadata does not count.
- JSON: the parsed content with the keys that hold times, dates or versions dropped.
- TOML: the parsed settings (the order of the keys means nothing).
- HTML and CSV: the text with clock readings (``12.3 s``, ISO dates) blanked.
- Everything else (safetensors, PNG): the bytes.

In JSON, HTML and CSV the run's own folder (``OUT``) reads as ``<out>``, so two runs in two
folders compare.

``check`` compares two manifests and lists every file that differs, is missing or is new;
it exits 1 on any difference. Run the baseline from a checkout of the old commit
(``git worktree add /tmp/base REV``; ``PYTHONPATH=/tmp/base/src``), the same with the new
code, then check:

    python benchmarks/identity.py run OUT [--hh hh.jsonl.gz] [--squality pairs.jsonl]
        [--only finetune]
    python benchmarks/identity.py check OLD/manifest.json NEW/manifest.json

Not part of the tests: several minutes of CPU per data set.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

VOLATILE_KEY = re.compile(r"(time|seconds|elapsed|wall|date|created|duration|version|_s$)", re.I)
CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}[T ][\d:.]+\S*|\d+(\.\d+)? ?(s|sec|seconds|min)\b")
ENTRY = "from rmlens.cli import entrypoint; entrypoint()"  # the code on sys.path
SETS = {"target_modules"}  # peft writes a set as a list, in the process's hash order
RUNS = {"demo": 10, "hh": 6, "squality": 10}


def steps(name: str, data: str | None, out: Path) -> list[list[str]]:
    """The commands of one data set, in order."""
    d = str(out / name)
    runs = str(RUNS[name])
    if name == "demo":
        return [["demo", "--out", d, "--runs", runs, "-q"], ["report", d]]
    return [
        ["memorize", "--data", data, "--out", d, "--runs", runs, "-q"],
        ["attribute", d, "-q"],
        ["evaluate", "--rm", d, "--data", data, "--out", d, "-q"],
        ["report", d],
    ]


def finetune_steps(data: str, out: Path, n_pairs: int = 48) -> list[list[str]]:
    """The fine-tuned trainer on the first ``n_pairs`` pairs of ``data``: one RM, one audit."""
    d = out / "finetune"
    d.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if data.endswith(".gz") else open
    with opener(data, "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(n_pairs), f)]
    pairs = d / "pairs.jsonl"
    pairs.write_text("".join(lines), encoding="utf-8")
    tuned = ["--model", "minilm", "--max-length", "64", "-q"]
    return [
        ["train", "--data", str(pairs), "--out", str(d / "rm"), "--epochs", "2", *tuned],
        ["memorize", "--data", str(pairs), "--out", str(d / "audit"), "--mode", "finetune",
         "--runs", "2", "--epochs", "1", "--estimator", "paired", *tuned],
    ]  # fmt: skip


def run(out: Path, hh: str | None, squality: str | None, only: str | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RMLENS_CACHE": str(out / "cache")}
    plan = [("demo", None), ("hh", hh), ("squality", squality)]
    commands = [c for name, data in plan if name == "demo" or data for c in steps(name, data, out)]
    small = squality or hh
    if small:
        commands.append(["mitigate", "--data", small, "--out", str(out / "mitigate"),
                         "--objectives", "bt,poe", "--runs", "6", "-q"])  # fmt: skip
        tuned = finetune_steps(small, out)
        commands = tuned if only == "finetune" else commands + tuned
    for command in commands:
        start = time.perf_counter()
        print("rmlens " + " ".join(command), flush=True)
        subprocess.run([sys.executable, "-c", ENTRY, *command], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        print(f"  {time.perf_counter() - start:.0f} s", flush=True)
    write_manifest(out)


def write_manifest(out: Path) -> None:
    """``out/manifest.json``: the fingerprint of every output file (the cache left out)."""
    manifest = {str(p.relative_to(out)): fingerprint(p, out) for p in sorted(out.rglob("*"))
                if p.is_file() and "cache" not in p.relative_to(out).parts
                and p.name != "manifest.json"}  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    print(f"{len(manifest)} files fingerprinted into {out / 'manifest.json'}")


def fingerprint(path: Path, out: Path) -> str:
    h = hashlib.sha1()
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        h.update(repr((list(frame.columns), [str(t) for t in frame.dtypes])).encode())
        for name in [c for c in frame if pd.api.types.is_object_dtype(frame[c])]:  # lists as JSON
            frame[name] = frame[name].map(lambda v: json.dumps(v, default=_listed))
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    elif path.suffix == ".json":
        text = _rooted(path.read_text(), out)
        h.update(json.dumps(_stable(json.loads(text)), sort_keys=True).encode())
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib

        h.update(json.dumps(tomllib.loads(path.read_text()), sort_keys=True).encode())
    elif path.suffix in (".html", ".csv", ".md", ".txt"):
        h.update(CLOCK.sub("", _rooted(path.read_text(errors="replace"), out)).encode())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def _rooted(text: str, out: Path) -> str:
    """The text with the run's folder written as ``<out>`` (also inside JSON strings)."""
    root = str(out.resolve())
    return text.replace(json.dumps(root)[1:-1], "<out>").replace(root, "<out>")


def _listed(value):
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _stable(value):
    if isinstance(value, dict):
        value = {k: sorted(v) if k in SETS and isinstance(v, list) else v for k, v in value.items()}
        return {k: _stable(v) for k, v in value.items() if not VOLATILE_KEY.search(str(k))}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def check(old: Path, new: Path) -> int:
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    differ = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    missing, added = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    for label, names in (("differ", differ), ("missing", missing), ("new", added)):
        for name in names:
            print(f"{label}: {name}")
    same = len(a.keys() & b.keys()) - len(differ)
    print(f"{same} of {len(a)} files identical; {len(differ)} differ, {len(missing)} missing, "
          f"{len(added)} new")
    return 1 if differ or missing else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--hh")
    r.add_argument("--squality")
    r.add_argument("--only", choices=["finetune"], help="run the fine-tuned part alone")
    m = sub.add_parser("manifest", help="fingerprint the outputs of a run again")
    m.add_argument("out", type=Path)
    c = sub.add_parser("check")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.hh, args.squality, args.only)
    elif args.command == "manifest":
        write_manifest(args.out)
    else:
        sys.exit(check(args.old, args.new))


if __name__ == "__main__":
    main()
