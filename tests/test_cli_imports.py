"""`rmlens --help` stays fast: the command line and the configs it reads import nothing heavy.

Each command module imports its config dataclasses at the top, and those import only light
modules; numpy, scipy, pandas, scikit-learn, torch and transformers load when a command runs.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "scipy", "pandas", "sklearn", "torch", "transformers")

_PROBE = """
import contextlib, io, sys
heavy = {heavy!r}
import rmlens.cli
print("AFTER_IMPORT", sorted(m for m in heavy if m in sys.modules))
import typer
from rmlens.cli import app, main

def paths(command, prefix):
    yield prefix
    for name, sub in sorted(getattr(command, "commands", {{}}).items()):
        yield from paths(sub, [*prefix, name])

codes = []
for argv in paths(typer.main.get_command(app), []):
    with contextlib.redirect_stdout(io.StringIO()):
        codes.append(main([*argv, "--help"]))
print("COMMANDS", len(codes), "CODES", sorted(set(codes)))
print("AFTER_HELP", sorted(m for m in heavy if m in sys.modules))
"""


def test_every_help_builds_without_the_heavy_stack():
    """`import rmlens.cli`, then `rmlens --help` and every command's and subcommand's help, in
    a fresh interpreter: none of numpy, scipy, pandas, sklearn, torch, transformers loads."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["AFTER_IMPORT"] == "[]", out.stdout
    assert lines["AFTER_HELP"] == "[]", out.stdout
    n_commands = int(lines["COMMANDS"].split()[0])
    assert n_commands > 10, out.stdout  # the root, every command, data's subcommands
    assert lines["COMMANDS"].endswith("CODES [0]"), out.stdout


def test_moved_configs_keep_their_public_names():
    """`HeadConfig` and `TrainConfig` live in `rmlens.rewards._config` (light) and are the same
    objects under every public name they had."""
    import rmlens
    from rmlens.rewards import HeadConfig, TrainConfig, _config, finetune, frozen

    assert frozen.HeadConfig is _config.HeadConfig is HeadConfig is rmlens.HeadConfig
    assert finetune.TrainConfig is _config.TrainConfig is TrainConfig is rmlens.TrainConfig
    assert frozen.FrozenHeadTrainer().config == HeadConfig()
    assert finetune.make_trainer(TrainConfig(rm_kind="implicit")).config.rm_kind == "implicit"
