"""Start-up time of ``rmlens --help`` and of each command's ``--help``.

Each is a fresh process (what a user waits for), timed as the best of ``--repeat`` runs and
printed beside a bare ``python -c pass`` and ``python -c "import torch"`` measured in the same
way, so the ratios hold on a noisy machine. Target: under 1 s on 2 cores. Not a test.

    python benchmarks/cli_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

COMMANDS = [
    [], ["memorize"], ["demo"], ["attribute"], ["report"], ["sweep"], ["evaluate"], ["train"],
    ["score"], ["generalize"], ["data"], ["data", "inspect"], ["data", "synth"],
]  # fmt: skip


def best_of(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-c", "import sys; from rmlens.cli import main; sys.exit(main())"]
    bare = best_of([sys.executable, "-c", "pass"], args.repeat)
    torch = best_of([sys.executable, "-c", "import torch"], args.repeat)
    print(f"python -c pass          {bare:6.3f} s")
    print(f"python -c 'import torch' {torch:6.3f} s")
    worst = 0.0
    for command in COMMANDS:
        seconds = best_of([*cli[:2], cli[2].replace("main()", f"main({[*command, '--help']!r})")],
                          args.repeat)  # fmt: skip
        worst = max(worst, seconds)
        name = " ".join(["rmlens", *command, "--help"])
        print(f"{name:32} {seconds:6.3f} s  ({seconds / torch:4.2f}x import torch)")
    print(f"slowest help: {worst:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
