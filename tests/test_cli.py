"""The command line as one system: options generated from the configs, --config files,
refusals worded with the flag the user typed, help text, lazy start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import rmlens.cli.memorize as memorize_cli
from rmlens.cli import main
from rmlens.cli._options import read_toml
from rmlens.memorization import AuditConfig
from rmlens.memorization._config import audit_train

COMMANDS = [
    ["memorize"], ["demo"], ["attribute"], ["report"], ["sweep"], ["evaluate"], ["train"],
    ["score"], ["generalize"], ["data", "inspect"], ["data", "synth"], ["compare"], ["mitigate"],
    ["sae"],
]  # fmt: skip


@pytest.fixture
def pairs_file(tmp_path: Path) -> Path:
    rows = [
        {"prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}", "user_id": f"u{i % 3}"}
        for i in range(6)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def captured(monkeypatch) -> list:
    """Replace the audit by a recorder: the tests check what reaches it."""
    seen: list = []

    def fake_run_audit(pairs, config, out, **kwargs):
        Path(out).mkdir(parents=True, exist_ok=True)
        seen.append(config)

    monkeypatch.setattr(memorize_cli, "run_audit", fake_run_audit)
    return seen


def run(args, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_finetune_takes_every_training_option(pairs_file, tmp_path, captured, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--mode", "finetune",
            "--model", "tiny", "--lr", "0.002", "--lora-r", "4", "--epochs", "3",
            "--batch-size", "2", "--beta", "0.5", "--bf16", "--finetune", "full",
            "--rm-kind", "implicit", "--max-length", "64", "--use-margin"]  # fmt: skip
    code, _, err = run(args, capsys)
    assert code == 0, err
    config = captured[0]
    assert (config.mode, config.model, config.max_length) == ("finetune", "tiny", 64)
    t = config.train
    assert (t.lr, t.lora_r, t.epochs, t.batch_size, t.beta) == (0.002, 4, 3, 2, 0.5)
    assert (t.finetune, t.rm_kind, t.use_margin) == ("full", "implicit", True)
    # --bf16: the older spelling of --precision bf16, the audit's own, which its runs share
    assert config.precision == config.resolved().train.precision == "bf16"
    assert config.head.epochs == AuditConfig().head.epochs  # the frozen head is untouched


def test_bf16_and_another_precision_are_refused_together(pairs_file, tmp_path, captured, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--mode", "finetune",
            "--bf16", "--precision", "fp32"]  # fmt: skip
    code, _, err = run(args, capsys)
    assert code == 2 and "--bf16 means --precision bf16; --precision fp32" in err
    assert not captured


def test_shared_option_goes_to_the_chosen_mode(pairs_file, tmp_path, captured, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--head", "linear",
            "--epochs", "5",
            "--lr", "0.01", "--weight-decay", "0.1", "--n-boot", "50", "--cm-threshold",
            "0.2", "--abort-after", "4"]  # fmt: skip
    assert run(args, capsys)[0] == 0
    config = captured[0]
    assert (config.head.epochs, config.head.lr, config.head.weight_decay) == (5, 0.01, 0.1)
    assert config.train == audit_train()
    assert (config.n_boot, config.cm_threshold, config.abort_after) == (50, 0.2, 4)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--lora-r", "4"], "--lora-r applies to --mode finetune only (here --mode frozen)"),
        (["--rm-kind", "implicit"], "--rm-kind applies to --mode finetune only"),
        (["--mode", "finetune", "--head", "mlp"], "--head applies to --mode frozen only"),
    ],
)
def test_option_of_the_other_mode_is_refused(pairs_file, tmp_path, captured, capsys, extra,
                                             expected):  # fmt: skip
    code, _, err = run(["memorize", "--data", pairs_file, "--out", tmp_path / "a", *extra], capsys)
    assert code == 2
    assert expected in err
    assert not captured


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--runs", "1"], "--runs must be an int >= 2 (TM and TG need runs that train on a pair "
                          "and runs that hold it out), got 1"),
        (["--folds", "1"], "--folds must be an int >= 2, got 1"),
        (["--mode", "finetune", "--lora-r", "0"], "--lora-r must be an int > 0, got 0"),
        (["--epochs", "0"], "--epochs must be an int > 0, got 0"),
    ],
)
def test_errors_name_the_flag(pairs_file, tmp_path, captured, capsys, extra, expected):
    code, _, err = run(["memorize", "--data", pairs_file, "--out", tmp_path / "a", *extra], capsys)
    assert code == 2
    assert err.strip() == f"error: {expected}"
    assert "AuditConfig" not in err and "parameter" not in err


def test_config_file_then_flags(pairs_file, tmp_path, captured, capsys):
    toml = tmp_path / "audit.toml"
    toml.write_text('runs = 7\nfolds = 3\nn_boot = 20\n[head]\nhead = "mlp"\nepochs = 3\n')
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--config", toml,
            "--runs", "9"]  # fmt: skip
    code, _, err = run(args, capsys)
    assert code == 0, err
    config = captured[0]
    assert (config.runs, config.folds, config.n_boot) == (9, 3, 20)
    assert (config.head.head, config.head.epochs) == ("mlp", 3)
    saved = read_toml(tmp_path / "a" / "config.toml")
    assert AuditConfig.from_dict(saved) == config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("runz = 7\n", "unknown AuditConfig setting(s): runz"),
        ('runs = "many"\n', "runs"),
        ("[train]\nlora_r = 4\n", "[train]: applies to --mode finetune only"),
        ("runs = [\n", "not valid TOML"),
    ],
)
def test_bad_config_file(pairs_file, tmp_path, captured, capsys, text, expected):
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--config", toml]
    code, _, err = run(args, capsys)
    assert code == 2
    assert expected in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_config_file_missing(pairs_file, tmp_path, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--config",
            tmp_path / "nope.toml"]  # fmt: skip
    code, _, err = run(args, capsys)
    assert code == 2 and "nope.toml: no such file (--config)" in err


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_and_config(command, capsys):
    code, out, _ = run([*command, "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "<bool>" not in text
    if command != ["data", "inspect"]:
        assert "--config FILE.toml" in text


def test_help_texts(capsys):
    text = " ".join(run(["memorize", "--help"], capsys)[1].split())
    for flag in ("--no-attribute", "--n-boot", "--cm-threshold", "--abort-after", "--lora-r",
                 "--bf16", "--map NEW=OLD"):  # fmt: skip
        assert flag in text
    assert "--mode frozen: 200; --mode finetune: 4" in text  # --epochs, one flag for both
    gen = " ".join(run(["generalize", "--help"], capsys)[1].split())
    assert "the model's" not in gen.split("--max-length", 1)[1].split("--", 1)[0]
    evaluate = " ".join(run(["evaluate", "--help"], capsys)[1].split())
    assert "Hugging Face datasets folder" in evaluate


def test_help_does_not_import_the_heavy_stack():
    """`rmlens --help` and each command's help build without torch, pandas or transformers."""
    code = (
        "import sys\n"
        "from rmlens.cli import main\n"
        "for cmd in (['--help'], ['memorize', '--help'], ['sweep', '--help']):\n"
        "    main(cmd)\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'pandas', 'sklearn') "
        "if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout


def test_import_rmlens_gives_the_verbs_lazily():
    """`import rmlens` lists the verbs and configs without importing torch or pandas; a name
    loads its module on first use."""
    code = (
        "import sys\n"
        "import rmlens\n"
        "names = set(rmlens.__all__)\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'pandas', 'sklearn') "
        "if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
        "config = rmlens.AuditConfig(runs=4)\n"
        "print('LIGHT', 'pandas' in sys.modules, config.runs)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout and "LIGHT False 4" in out.stdout

    import rmlens

    verbs = ("load_pairs", "audit", "attribute", "evaluate", "compare", "mitigate", "sweep",
             "generalize", "train", "write_report", "load_rm", "overoptimize",
             "generate_candidates", "load_candidates")  # fmt: skip
    configs = ("AuditConfig", "HeadConfig", "TrainConfig", "AttributeConfig", "EvaluateConfig",
               "CompareConfig", "MitigateConfig", "SweepConfig", "GeneralizeConfig",
               "ReportConfig", "SynthConfig", "OveroptimizeConfig", "CandidatesConfig")  # fmt: skip
    others = ("InputError", "RmlensWarning", "RmlensNote", "ExperimentDir")
    assert set(verbs + configs + others) <= set(rmlens.__all__)
    assert all(callable(getattr(rmlens, name)) for name in rmlens.__all__)
    from rmlens.memorization import audit

    assert rmlens.audit is audit


def test_broken_json_line_names_its_column(tmp_path, capsys):
    good = '{"prompt": "a", "chosen": "b", "rejected": "c"}'
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n" + good[:-1] + "\n")  # the second line lost its closing brace
    code, out, err = run(["data", "inspect", path, "--strict"], capsys)
    assert code == 2
    expected = f"bad.jsonl line 2: invalid JSON (Expecting ',' delimiter at column {len(good)})"
    assert expected in " ".join((out + err).split())


def test_scoring_commands_share_the_load_options(tmp_path, pairs_file, capsys):
    for command in (["score"], ["evaluate"], ["sweep"]):
        text = " ".join(run([*command, "--help"], capsys)[1].split())
        assert "[default: auto]" in text.split("--device", 1)[1].split(" --", 1)[0]
        assert "--score-index" in text and "--trust-remote-code" in text
    args = ["score", "--rm", tmp_path / "nope", "--data", pairs_file, "--out", tmp_path / "s.jsonl"]
    code, _, err = run(args, capsys)
    assert code == 2 and err.startswith(f"error: --rm {tmp_path / 'nope'}")


def test_encode_batch_size_is_its_own_flag(pairs_file, tmp_path, captured, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--encode-batch-size",
            "8", "--head", "linear", "--batch-size", "16"]  # fmt: skip
    assert run(args, capsys)[0] == 0
    assert (captured[0].encode_batch_size, captured[0].head.batch_size) == (8, 16)


def test_numeric_list_option(pairs_file, tmp_path, captured, capsys):
    args = ["memorize", "--data", pairs_file, "--out", tmp_path / "a", "--mode", "finetune",
            "--lr-grid", "1e-4,3e-4", "--lr-grid", "1e-3"]  # fmt: skip
    assert run(args, capsys)[0] == 0
    assert captured[0].train.lr_grid == (1e-4, 3e-4, 1e-3)
    code, _, err = run([*args[:-2], "--lr-grid", "fast"], capsys)
    assert code == 2 and "--lr-grid must be floats, got 1e-4,3e-4,fast" in err
